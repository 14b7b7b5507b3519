package session

import (
	"context"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// Status is what a gate in front of a session's calls asks of it: whether
// it runs, is paused (and by whom) or is gone, and in which container.
type Status struct {
	Key         string
	ID          string
	ContainerID string
	State       string // StateRunning, StatePaused, StateStopped or StateLost, as Info says
	PausedBy    string // PausedByUser or PausedByIdle when State is StatePaused
}

// Status answers as Info would for State, PausedBy and ContainerID, without
// asking the engine when this process holds the session open: its stream
// to the container's init is up (it ends when the container stops, is
// killed or removed) and the session's row, read again only once some
// process changed a session, records neither an end, another container
// nor a time to live past. Otherwise it asks Info. It is for a server
// that checks a session before each call (an engine inspection cost more
// CPU than the call it gated); a container frozen behind this process's
// back (docker pause) reads as running until a call finds it frozen.
func (m *Manager) Status(ctx context.Context, key string) (Status, error) {
	if err := m.begin(); err != nil {
		return Status{}, err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return Status{}, err
	}
	id := ID(key)
	if st, ok := m.openStatus(ctx, key, id); ok {
		return st, nil
	}
	in, err := m.info(ctx, key, infoOptions{noMemory: true})
	if err != nil {
		return Status{}, err
	}
	return Status{Key: key, ID: id, ContainerID: in.ContainerID, State: in.State, PausedBy: in.PausedBy}, nil
}

// upStream is the container an entry's stream is up to, and that stream's
// client: while the client's stream has not ended, the container exists
// and has not stopped.
type upStream struct {
	container string
	client    *kernel.Client
}

// streamUp records e's new client (e's turn held) for Status.
func (m *Manager) streamUp(e *entry) {
	m.mu.Lock()
	e.up = upStream{container: e.containerID, client: e.client}
	m.mu.Unlock()
}

// openStatus is Status from this process's open entry of session id, when
// it can tell without the engine.
func (m *Manager) openStatus(ctx context.Context, key, id string) (Status, bool) {
	m.mu.Lock()
	e := m.sessions[id]
	var up upStream
	if e != nil && !e.gone {
		up = e.up
	}
	m.mu.Unlock()
	if up.client == nil {
		return Status{}, false
	}
	select {
	case <-up.client.Done():
		return Status{}, false
	default:
	}
	row, err := m.liveness(ctx, e)
	if err != nil || row.Stopped || row.ContainerID != up.container || pastExpiry(row.Expires, time.Now()) {
		return Status{}, false
	}
	st := Status{Key: key, ID: id, ContainerID: up.container, State: StateRunning}
	if !row.Paused.IsZero() {
		st.State, st.PausedBy = StatePaused, pausedBy(row.PauseReason)
	}
	return st, true
}
