package session

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// Info describes the session of key from the engine and the database, so
// what other processes did (pause, renew, stop) shows: its state
// (StateRunning, StatePaused and by whom, StateStopped, StateLost), created, last used,
// expiry, execution count, limits, metadata, memory use and image. It
// neither creates nor resumes the session. ErrNotFound if the key never had
// one (in this database). Reading the memory use costs the engine about a
// second on some hosts (its stats call waits for a sample): pass
// WithoutMemoryUse when the answer gates a call rather than describes.
func (m *Manager) Info(ctx context.Context, key string, opts ...InfoOption) (Info, error) {
	if err := m.begin(); err != nil {
		return Info{}, err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return Info{}, err
	}
	var o infoOptions
	for _, opt := range opts {
		if opt.apply != nil {
			opt.apply(&o)
		}
	}
	return m.info(ctx, key, o)
}

// InfoOption changes what Info reads.
type InfoOption struct{ apply func(*infoOptions) }

type infoOptions struct{ noMemory bool }

// WithoutMemoryUse leaves Info.MemoryBytes 0 instead of asking the engine.
func WithoutMemoryUse() InfoOption { return InfoOption{func(o *infoOptions) { o.noMemory = true }} }

func (m *Manager) info(ctx context.Context, key string, o infoOptions) (Info, error) {
	id := ID(key)
	c, cerr := m.drv.Inspect(ctx, m.containerName(id))
	if cerr != nil && !errors.Is(cerr, ErrContainerNotFound) {
		return Info{}, &Error{Op: "info", Key: key, Err: cerr}
	}
	row, rerr := m.store.Session(ctx, m.ns, id)
	if rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
		return Info{}, &Error{Op: "info", Key: key, Err: rerr}
	}
	haveC, haveR := cerr == nil, rerr == nil
	if !haveC && !haveR {
		return Info{}, &Error{Op: "info", Key: key, Err: ErrNotFound}
	}
	in := Info{Key: key, ID: id, Storage: string(m.cfg.SessionStorage)}
	if haveC {
		cr := m.creationOf(c)
		in.ContainerID, in.Created, in.Image, in.Labels = c.ID, c.Created, cr.image, cr.meta
		in.Expires = labelExpiry(c)
		in.IdleAction = string(m.idleActionOf(c))
		in.Limits = &Limits{MemoryMB: cr.memoryMB, CPUs: cr.cpus, Pids: m.cfg.PidsLimit, TTL: cr.ttl}
		if s := c.Labels[LabelStorage]; s != "" {
			in.Storage = s
		}
		switch {
		case c.Paused:
			in.State, in.PausedBy = StatePaused, PausedByUser
		case c.Running:
			in.State = StateRunning
		case c.Status == "created":
			in.State = StateRunning // another process is starting it
		default:
			in.State, in.StopReason = StateLost, "its container "+deathReason(c, m.image.ID)
		}
	}
	if haveR && (!haveC || row.ContainerID == c.ID) {
		in.Created, in.LastUsed, in.ExecutionCount = row.Created, row.LastUsed, row.ExecutionCount
		m.fresher(id, row.ContainerID, &in.LastUsed, &in.ExecutionCount)
		in.Expires, in.Paused = row.Expires, row.Paused
		if in.State == StatePaused {
			in.PausedBy = pausedBy(row.PauseReason)
		}
		if row.Storage != "" {
			in.Storage = row.Storage
		}
		if !haveC {
			in.ContainerID = row.ContainerID
			in.Limits = limitsOfRow(row.Limits)
			in.Image = row.Limits["image"]
			in.StopReason = row.StopReason
			switch {
			case row.Stopped.IsZero():
				in.State, in.StopReason = StateLost, "its container was removed"
			case strings.HasPrefix(row.StopReason, "lost"):
				in.State = StateLost
			default:
				in.State = StateStopped
			}
		}
	}
	if in.Image == "" {
		in.Image = "default"
	}
	if (in.State == StateRunning || in.State == StatePaused) && pastExpiry(in.Expires, time.Now()) {
		// Its time to live is over, whether or not a sweep removed it
		// yet (none runs with only short-lived processes): it never
		// runs code again, so it reads as the sweep will record it.
		in.State, in.StopReason, in.PausedBy = StateStopped, expiredReason(in.Expires), ""
	}
	m.mu.Lock()
	if e := m.sessions[id]; e != nil && e.containerID == in.ContainerID && e.lastUsed.After(in.LastUsed) {
		in.LastUsed = e.lastUsed
	}
	m.mu.Unlock()
	if mr, ok := m.drv.(memoryReader); ok && !o.noMemory && (in.State == StateRunning || in.State == StatePaused) {
		in.MemoryBytes, _ = mr.MemoryUsage(ctx, in.ContainerID)
	}
	return in, nil
}

// limitsOfRow reads the limits the history recorded (see limitsOf).
func limitsOfRow(l map[string]string) *Limits {
	if l == nil {
		return nil
	}
	out := &Limits{}
	out.MemoryMB, _ = strconv.Atoi(l["memory_mb"])
	out.CPUs, _ = strconv.ParseFloat(l["cpus"], 64)
	out.Pids, _ = strconv.Atoi(l["pids"])
	if s, err := strconv.ParseInt(l["ttl_s"], 10, 64); err == nil {
		out.TTL = time.Duration(s) * time.Second
	}
	return out
}
