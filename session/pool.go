package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/kernel"
)

// poolDir holds the BIND folders of warm containers, under SESSIONS_ROOT so
// that handing one to a session is a rename on the same filesystem.
const poolDir = ".pool"

// pool keeps warm containers with their kernel connected, so a new key is
// served without a container start. Only fillLoop creates them, one at a
// time, so the pool never holds more than size.
type pool struct {
	m     *Manager
	size  int
	ready chan *pooled
	wake  chan struct{}

	mu  sync.Mutex
	ids map[string]bool // containers this pool started and still holds
}

// pooled is a warm container.
type pooled struct {
	id     string
	client *kernel.Client
	dir    string // its BIND folder (relative to SESSIONS_ROOT), in BIND mode
}

func newPool(m *Manager, size int) *pool {
	return &pool{m: m, size: size, ready: make(chan *pooled, size), wake: make(chan struct{}, 1), ids: map[string]bool{}}
}

// owns reports whether container id belongs to this pool (so the sweep
// leaves it alone).
func (p *pool) owns(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ids[id]
}

func (p *pool) forget(id string) {
	p.mu.Lock()
	delete(p.ids, id)
	p.mu.Unlock()
}

// take returns a warm container whose kernel is still connected, or nil.
// The caller calls signal once the container has its session's name, so
// that the replacement never runs beside it as a second warm container.
func (p *pool) take() *pooled {
	for {
		select {
		case w := <-p.ready:
			p.forget(w.id)
			select {
			case <-w.client.Done():
				p.discard(w) // removed or killed while it waited
				continue
			default:
				return w
			}
		default:
			return nil
		}
	}
}

func (p *pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// PoolReady returns how many warm containers wait, kernel connected, for
// new keys.
func (m *Manager) PoolReady() int { return len(m.pool.ready) }

// fillLoop keeps the pool full until the Manager closes. A failure to start a
// container is logged and retried with a growing delay.
func (p *pool) fillLoop() {
	defer p.m.wg.Done()
	ctx := p.m.bg
	delay := time.Second
	for {
		for len(p.ready) < p.size && ctx.Err() == nil {
			w, err := p.start(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				p.m.log.Warn("start warm container", "err", err, "retry_in", delay)
				select {
				case <-time.After(delay):
				case <-ctx.Done():
					return
				}
				delay = min(delay*2, time.Minute)
				continue
			}
			delay = time.Second
			p.ready <- w // cannot block: only this loop adds
		}
		select {
		case <-p.wake:
		case <-ctx.Done():
			return
		}
	}
}

// start creates one warm container and connects to its kernel.
func (p *pool) start(ctx context.Context) (*pooled, error) {
	m := p.m
	var b [6]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	w := &pooled{}
	var workspace string
	name := m.ns + "_pool_" + suffix
	if m.cfg.SessionStorage == config.StorageBind {
		// Named after the container: a sweep tells whose disk it is.
		w.dir = path.Join(poolDir, name)
		var err error
		if workspace, err = m.makeSessionDir(w.dir); err != nil {
			p.removeDir(w)
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	// No role or key label: handed to a key, it is renamed, and labels
	// cannot follow (see LabelRole).
	t0 := time.Now()
	var id string
	var err error
	if w.dir != "" {
		id, err = m.createWarm(ctx, w.dir, m.spec(name, "", workspace))
	} else {
		id, err = m.createContainer(ctx, m.spec(name, "", workspace))
	}
	if err != nil {
		// Cancelled mid-call, the engine may have made it all the same:
		// it has a name of its own, so remove it by that.
		m.removeBestEffort(name)
		p.removeDir(w)
		return nil, err
	}
	w.id = id
	p.mu.Lock()
	p.ids[id] = true
	p.mu.Unlock()
	if w.client, err = m.dial(ctx, id); err != nil {
		p.discard(w)
		return nil, err
	}
	// The init answers before its kernel worker has finished starting;
	// inspecting the namespace waits for the worker without counting as an
	// execution, so the first Exec on a warm container runs at once.
	if _, err := w.client.Inspect(ctx); err != nil {
		p.discard(w)
		return nil, err
	}
	m.metrics.coldStarted("pool", time.Since(t0))
	return w, nil
}

// discard removes a warm container and its folder.
func (p *pool) discard(w *pooled) {
	if w.client != nil {
		w.client.Close()
	}
	if w.id != "" {
		p.forget(w.id)
		p.m.removeBestEffort(w.id)
	}
	p.removeDir(w)
}

func (p *pool) removeDir(w *pooled) {
	if w.dir != "" {
		dir := filepath.Join(p.m.cfg.SessionsRoot, w.dir)
		if err := unmountDisk(w.dir, p.m.cfg.SessionsRoot); err != nil {
			p.m.log.Warn("remove warm container folder", "dir", dir, "err", err)
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			p.m.log.Warn("remove warm container folder", "dir", dir, "err", err)
		}
	}
}

// drain removes every warm container; the Manager is closing.
func (p *pool) drain(ctx context.Context) error {
	var errs []error
	for {
		select {
		case w := <-p.ready:
			w.client.Close()
			p.forget(w.id)
			errs = append(errs, p.m.drv.Remove(ctx, w.id))
			p.removeDir(w)
		default:
			return errors.Join(errs...)
		}
	}
}
