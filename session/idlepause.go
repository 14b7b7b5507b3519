package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
)

// Idle pause: with IDLE_ACTION=pause (or OnIdle(config.IdlePause) for one
// session) the idle sweep freezes a session instead of removing it. Its
// next call (Exec, a command, a file operation, in any process) thaws it
// first, Python state intact; a session paused so for
// IDLE_PAUSED_TIMEOUT_S is removed. A caller's Pause is another thing: it
// is never undone behind the caller's back (ErrPaused until Resume). The
// database says which (store.Session.PauseReason), so every process
// agrees; Info.PausedBy and List say it too.

// Who paused a session, as Info.PausedBy says it.
const (
	PausedByIdle = "idle" // the idle sweep (IDLE_ACTION=pause): its next call resumes it
	PausedByUser = "user" // a caller (Pause, docker pause): it stays paused until Resume
)

// Labels of a session's idle action, on every container: whichever
// manager sweeps applies the container's own.
const (
	LabelIdleAction = "io.agentbox.idle-action" // "stop" or "pause"
	// LabelIdlePausedTimeout is IDLE_PAUSED_TIMEOUT_S in seconds ("0":
	// kept until its time to live).
	LabelIdlePausedTimeout = "io.agentbox.idle-paused-timeout"
)

// OnIdle sets what the idle timeout does to the session (default
// IDLE_ACTION): config.IdleStop removes it, config.IdlePause freezes it
// until its next call.
func OnIdle(a config.IdleAction) StartOption {
	return StartOption{func(o *startOptions) { o.idleAction = a }}
}

// defaultIdleAction is IDLE_ACTION, the zero value being stop.
func (m *Manager) defaultIdleAction() config.IdleAction {
	if m.cfg.IdleAction == "" {
		return config.IdleStop
	}
	return m.cfg.IdleAction
}

// idleActionOf is the idle action container c was made with, or this
// manager's for a container from before the label existed.
func (m *Manager) idleActionOf(c Container) config.IdleAction {
	if a := config.IdleAction(c.Labels[LabelIdleAction]); a.Valid() {
		return a
	}
	return m.defaultIdleAction()
}

// idlePausedTimeoutOf is the IDLE_PAUSED_TIMEOUT_S container c was made
// with, or this manager's.
func (m *Manager) idlePausedTimeoutOf(c Container) time.Duration {
	n, err := strconv.ParseInt(c.Labels[LabelIdlePausedTimeout], 10, 64)
	if err != nil || n < 0 {
		return m.cfg.IdlePausedTimeout
	}
	return time.Duration(n) * time.Second
}

// pausedBy says who paused a session whose row records pause reason
// reason.
func pausedBy(reason string) string {
	if reason == store.PauseIdle {
		return PausedByIdle
	}
	return PausedByUser
}

// pauseIdle freezes session id's container c, idle since last, instead of
// removing it (its turn held, if this process has it). The database
// decides first, against a use that begins meanwhile in any process. It
// reports false when the driver cannot pause (the caller removes it).
func (m *Manager) pauseIdle(ctx context.Context, id string, c Container, last time.Time) bool {
	p, ok := m.drv.(pauser)
	if !ok {
		return false
	}
	now := time.Now()
	paused, err := m.store.PauseIdleSession(ctx, m.ns, id, c.ID, last, now)
	if err != nil {
		m.log.Warn("pause idle session", "session_id", id, "err", err)
		return true
	}
	if !paused {
		return true // used since, or paused, or ended by another process
	}
	if err := m.bumpEpoch(); err != nil {
		m.log.Warn("pause idle session", "session_id", id, "err", err)
	}
	undo := func(why error) {
		m.log.Warn("pause idle session", "session_id", id, "container_id", shortID(c.ID), "err", why)
		if err := m.store.SetPaused(context.WithoutCancel(ctx), m.ns, id, time.Time{}); err != nil && !errors.Is(err, store.ErrNotFound) {
			m.log.Warn("pause idle session: undo the recorded pause", "session_id", id, "err", err)
		}
		if err := m.bumpEpoch(); err != nil {
			m.log.Warn("pause idle session", "session_id", id, "err", err)
		}
	}
	// An execution another process began as the pause was decided (its
	// intent written just after) is not frozen under it.
	if m.runningElsewhere(ctx, id) {
		undo(ErrBusy)
		return true
	}
	if err := p.Pause(ctx, c.ID); err != nil {
		if err = m.raced(ctx, c, true, err); err != nil {
			undo(err)
			return true
		}
	}
	m.metrics.idleDone("paused")
	m.log.Info("pause idle session", "session_id", id, "container_id", shortID(c.ID), "idle", now.Sub(last).Round(time.Second))
	return true
}

// removePausedIfDue removes session id's container c if the idle sweep
// paused it longer than its IDLE_PAUSED_TIMEOUT_S ago and nothing resumed
// it since. A caller's pause is never removed for its length.
func (m *Manager) removePausedIfDue(ctx context.Context, id string, c Container, row store.Session, now time.Time) {
	if row.ContainerID != c.ID || row.PauseReason != store.PauseIdle || row.Paused.IsZero() || !row.Stopped.IsZero() {
		return
	}
	limit := m.idlePausedTimeoutOf(c)
	if limit <= 0 || now.Sub(row.Paused) <= limit {
		return
	}
	reason := fmt.Sprintf("%s: removed after %s paused unused (IDLE_ACTION=pause, IDLE_PAUSED_TIMEOUT_S)", stopIdle, limit)
	ended, err := m.store.EvictPausedSession(ctx, m.ns, id, c.ID, row.Paused, time.Now(), reason)
	if err != nil {
		m.log.Warn("remove paused idle session", "session_id", id, "err", err)
		return
	}
	if !ended {
		return // resumed since, or paused by a caller, or ended elsewhere
	}
	if err := m.bumpEpoch(); err != nil {
		m.log.Warn("remove paused idle session", "session_id", id, "err", err)
	}
	m.mu.Lock()
	e := m.sessions[id]
	m.mu.Unlock()
	if e != nil && e.holds(c.ID) {
		m.drop(e)
		m.closeIdle(e)
	}
	m.log.Info("remove paused idle session", "session_id", id, "container_id", shortID(c.ID), "paused", row.Paused)
	if err := m.drv.Remove(ctx, c.ID); err != nil && !errors.Is(err, ErrContainerNotFound) {
		// Recorded as ended: the next process to open the key removes it.
		m.log.Warn("remove paused idle session", "session_id", id, "err", err)
		return
	}
	m.markStopped(ctx, id, c.ID, reason)
	m.metrics.idleDone("removed_paused")
}

// resumeIdle thaws session id's container containerID, which the idle
// sweep paused, for the call about to use it (key's), and records the
// resume as a use.
func (m *Manager) resumeIdle(ctx context.Context, key, id, containerID string) error {
	if p, ok := m.drv.(pauser); ok {
		c, err := m.drv.Inspect(ctx, containerID)
		switch {
		case errors.Is(err, ErrContainerNotFound):
			// Removed meanwhile: what opens the key next says why.
		case err != nil:
			return &Error{Op: "resume idle", Key: key, ContainerID: containerID, Err: err}
		case c.Paused:
			if err := p.Unpause(ctx, c.ID); err != nil {
				if err = m.raced(ctx, c, false, err); err != nil {
					return &Error{Op: "resume idle", Key: key, ContainerID: containerID, Err: err}
				}
			}
		}
	}
	now := time.Now()
	if err := m.store.ResumeSession(ctx, m.ns, id, now); err != nil && !errors.Is(err, store.ErrNotFound) {
		return &Error{Op: "resume idle", Key: key, ContainerID: containerID, Err: fmt.Errorf("record the resume (the container runs): %w", err)}
	}
	if err := m.bumpEpoch(); err != nil {
		m.log.Warn("resume idle session", "session_id", id, "err", err)
	}
	m.mu.Lock()
	if e := m.sessions[id]; e != nil && now.After(e.lastUsed) {
		e.lastUsed = now
	}
	m.mu.Unlock()
	m.metrics.idleDone("resumed")
	m.log.Info("resume idle session", "session_id", id, "container_id", shortID(containerID))
	return nil
}

// pausedByIdleRow reports whether session id's row records that the idle
// sweep paused container containerID.
func (m *Manager) pausedByIdleRow(ctx context.Context, id, containerID string) bool {
	row, err := m.store.Session(ctx, m.ns, id)
	return err == nil && row.ContainerID == containerID && row.Stopped.IsZero() && row.PauseReason == store.PauseIdle
}
