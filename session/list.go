package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/kernel"
)

// Info describes a session. ContainerID names one incarnation of it: a
// session created again under its key has another (agentbox serve's execd
// tokens rely on that).
type Info struct {
	Key            string    `json:"key"` // empty if no record names it (its history was deleted)
	ID             string    `json:"id"`
	ContainerID    string    `json:"container"`
	State          string    `json:"state"` // List: the container's ("running", "paused", "exited", ...), or StateExpired; Info, Start: StateRunning, StatePaused, StateStopped or StateLost
	Created        time.Time `json:"created"`
	LastUsed       time.Time `json:"last_used"`
	ExecutionCount int       `json:"execution_count"`
	MemoryBytes    int64     `json:"memory_bytes"` // in use now; 0 if unknown
	Storage        string    `json:"storage"`

	// Set by Info and Start (List leaves them empty).
	Expires time.Time `json:"expires,omitzero"` // removed then, used or not; zero: no time to live
	Paused  time.Time `json:"paused,omitzero"`  // since when, when paused through a Manager
	// PausedBy says who paused a paused session (List sets it too):
	// PausedByIdle (IDLE_ACTION=pause; its next call resumes it) or
	// PausedByUser (it stays paused until Resume).
	PausedBy   string            `json:"paused_by,omitempty"`
	IdleAction string            `json:"idle_action,omitempty"` // what its idle timeout does: "stop" or "pause"
	Image      string            `json:"image,omitempty"`       // the sandbox image's name ("default": SANDBOX_IMAGE)
	Limits     *Limits           `json:"limits,omitempty"`      // what it was created with
	Labels     map[string]string `json:"labels,omitempty"`      // its metadata (session.Labels)
	StopReason string            `json:"stop_reason,omitempty"` // why it is stopped or lost (List: expired)
}

// Limits are a session's resource limits.
type Limits struct {
	MemoryMB int     `json:"memory_mb"`
	CPUs     float64 `json:"cpus"`
	Pids     int     `json:"pids"`
	// TTL is the time to live it was created with; 0: none. Renew moves
	// Info.Expires, not this. In JSON: ttl_s, whole seconds.
	TTL time.Duration `json:"-"`
}

// limitsJSON is Limits as JSON: durations in seconds, as a person or a
// Python client reads them, not Go's nanoseconds.
type limitsJSON struct {
	MemoryMB int     `json:"memory_mb"`
	CPUs     float64 `json:"cpus"`
	Pids     int     `json:"pids"`
	TTL      int64   `json:"ttl_s,omitempty"`
}

// MarshalJSON writes the TTL as ttl_s, rounded up to whole seconds.
func (l Limits) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitsJSON{l.MemoryMB, l.CPUs, l.Pids, int64((l.TTL + time.Second - 1) / time.Second)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (l *Limits) UnmarshalJSON(b []byte) error {
	var j limitsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = Limits{MemoryMB: j.MemoryMB, CPUs: j.CPUs, Pids: j.Pids, TTL: time.Duration(j.TTL) * time.Second}
	return nil
}

// Start makes sure the session of key exists and its kernel is reachable,
// creating it with opts if needed, and describes it (see Info). opts are
// checked even when the session exists, and then ignored (see
// StartOption).
func (m *Manager) Start(ctx context.Context, key string, opts ...StartOption) (_ Info, err error) {
	ctx, span := m.startSpan(ctx, SpanStart, key)
	defer func() { endSpan(span, err) }()
	if err := m.begin(); err != nil {
		return Info{}, err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return Info{}, err
	}
	cr, err := m.resolve(key, opts)
	if err != nil {
		return Info{}, &Error{Op: "start", Key: key, Err: err}
	}
	_, release, err := m.acquireWith(ctx, key, true, cr)
	if err != nil {
		return Info{}, err
	}
	release()
	return m.info(ctx, key, infoOptions{})
}

// Inspect returns a summary of the kernel's namespace in the session of key
// (variables and modules), waiting for a running execution to finish.
// ErrNotFound if the session does not exist.
func (m *Manager) Inspect(ctx context.Context, key string) (*kernel.State, error) {
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.calls.Done()
	e, release, err := m.acquire(ctx, key, false)
	if err != nil {
		return nil, err
	}
	defer release()
	var st *kernel.State
	_, err = m.run(ctx, e, func(c *kernel.Client) (*kernel.Result, error) {
		var err error
		st, err = c.Inspect(ctx)
		return nil, err
	}, func(c *kernel.Client) (*kernel.Result, error) {
		var err error
		st, err = c.Inspect(ctx)
		return nil, err
	})
	if err != nil {
		return nil, &Error{Op: "inspect", Key: key, ContainerID: e.containerID, Err: err}
	}
	return st, nil
}

// ListOption changes what List reads.
type ListOption struct{ apply func(*listOptions) }

type listOptions struct {
	noMemory bool
	keep     func(key string) bool
}

// ListWithoutMemoryUse leaves Info.MemoryBytes 0 instead of asking the
// engine once per session.
func ListWithoutMemoryUse() ListOption {
	return ListOption{func(o *listOptions) { o.noMemory = true }}
}

// ListKeys keeps only the sessions whose key keep accepts (a session no
// record names has the key ""). They are dropped before anything is read
// per session, so what a list costs depends only on the sessions kept: a
// server lists one tenant's without touching, or timing, another's.
func ListKeys(keep func(key string) bool) ListOption {
	return ListOption{func(o *listOptions) { o.keep = keep }}
}

// List describes the sessions of the Manager's namespace, whichever process
// started them, newest use first.
func (m *Manager) List(ctx context.Context, opts ...ListOption) ([]Info, error) {
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.calls.Done()
	var o listOptions
	for _, opt := range opts {
		if opt.apply != nil {
			opt.apply(&o)
		}
	}
	// Filtered by name, not role: a warm container handed to a key takes
	// the key's name but no role or key label (labels are fixed at
	// creation); its key comes from the database.
	list, err := m.drv.List(ctx, map[string]string{LabelNamespace: m.ns})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	rows, err := m.store.Sessions(ctx, m.ns)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	byID := map[string]store.Session{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	out := make([]Info, 0, len(list))
	now := time.Now()
	for _, c := range list {
		id, ok := strings.CutPrefix(c.Name, m.ns+"_")
		if !ok || strings.HasPrefix(id, "pool_") {
			continue // a warm container handed out but not renamed yet
		}
		in := Info{ID: id, ContainerID: c.ID, State: c.Status, Created: c.Created, Storage: c.Labels[LabelStorage], Key: c.Labels[LabelKey]}
		exp := labelExpiry(c)
		if c.Paused {
			in.PausedBy = PausedByUser // docker pause, when no row says
		}
		if r, ok := byID[id]; ok && r.ContainerID == c.ID {
			in.Key, in.Created, in.LastUsed, in.ExecutionCount = r.Key, r.Created, r.LastUsed, r.ExecutionCount
			m.fresher(id, c.ID, &in.LastUsed, &in.ExecutionCount)
			exp = r.Expires // renewals live here
			if c.Paused {
				in.PausedBy = pausedBy(r.PauseReason)
			}
		}
		if c.Running && pastExpiry(exp, now) {
			// Not removed yet (no sweep ran since), but over: see Info.
			in.State, in.StopReason = StateExpired, expiredReason(exp)
		}
		if o.keep != nil && !o.keep(in.Key) {
			continue
		}
		m.mu.Lock()
		if e := m.sessions[id]; e != nil && e.lastUsed.After(in.LastUsed) {
			in.LastUsed = e.lastUsed
		}
		m.mu.Unlock()
		out = append(out, in)
	}
	if mr, ok := m.drv.(memoryReader); ok && !o.noMemory {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i := range out {
			if out[i].State != "running" && out[i].State != "paused" {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				out[i].MemoryBytes, _ = mr.MemoryUsage(ctx, out[i].ContainerID)
			}()
		}
		wg.Wait()
	}
	slices.SortFunc(out, func(a, b Info) int { return b.LastUsed.Compare(a.LastUsed) })
	return out, nil
}

// Stop removes the session of key: its container and kernel state go, its
// history and BIND folder stay. A running execution ends with
// ErrSessionLost. ErrNotFound if there is no such session.
func (m *Manager) Stop(ctx context.Context, key string) (err error) {
	ctx, span := m.startSpan(ctx, SpanStop, key)
	defer func() { endSpan(span, err) }()
	if err := m.begin(); err != nil {
		return err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return err
	}
	id := ID(key)
	m.mu.Lock()
	e := m.sessions[id]
	m.mu.Unlock()
	if e != nil {
		m.drop(e)
		// An execution in flight sees its stream end with the container and
		// closes its client itself; an idle entry's client is closed here.
		defer m.closeIdle(e)
	}
	c, err := m.drv.Inspect(ctx, m.containerName(id))
	if errors.Is(err, ErrContainerNotFound) {
		return &Error{Op: "stop", Key: key, Err: ErrNotFound}
	}
	if err != nil {
		return &Error{Op: "stop", Key: key, Err: err}
	}
	if err := m.drv.Remove(ctx, c.ID); err != nil {
		return &Error{Op: "stop", Key: key, ContainerID: c.ID, Err: err}
	}
	m.markStopped(ctx, id, c.ID, stopStopped)
	return nil
}

// StopAll removes every container of the Manager's namespace, sessions and
// warm containers alike, whichever process started them, and returns how
// many sessions it stopped.
func (m *Manager) StopAll(ctx context.Context) (int, error) {
	if err := m.begin(); err != nil {
		return 0, err
	}
	defer m.calls.Done()
	list, err := m.drv.List(ctx, map[string]string{LabelNamespace: m.ns})
	if err != nil {
		return 0, fmt.Errorf("stop all: %w", err)
	}
	m.mu.Lock()
	var dropped []*entry
	for _, e := range m.sessions {
		e.gone = true
		dropped = append(dropped, e)
	}
	clear(m.sessions)
	m.mu.Unlock()
	for _, e := range dropped {
		defer m.closeIdle(e)
	}
	n := 0
	var errs []error
	for _, c := range list {
		if err := m.drv.Remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		if id, ok := strings.CutPrefix(c.Name, m.ns+"_"); ok && !strings.HasPrefix(id, "pool_") {
			m.markStopped(ctx, id, c.ID, stopStopped)
			n++
		}
	}
	return n, errors.Join(errs...)
}

// closeIdle closes the kernel client of an entry nobody is using.
func (m *Manager) closeIdle(e *entry) {
	select {
	case e.turn <- struct{}{}:
		// A last try for results the history failed to record; what
		// still fails stays an open intent, which the next process that
		// uses the session finishes from the kernel.
		m.recordPending(m.bg, e)
		if e.client != nil {
			e.client.Close()
			e.client = nil
		}
		<-e.turn
	default:
	}
}
