package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
)

// sweepLoop evicts idle sessions and removes orphans until the Manager
// closes.
func (m *Manager) sweepLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		m.sweep(m.bg)
		select {
		case <-t.C:
		case <-m.bg.Done():
			return
		}
	}
}

// sweep looks once at every container of the namespace: sessions unused for
// IDLE_TIMEOUT_S are removed (their BIND folders stay), or paused with
// IDLE_ACTION=pause, and removed once paused so for IDLE_PAUSED_TIMEOUT_S;
// containers no manager
// can use (stopped, dead, from another image) and warm containers of managers
// that did not clean up are removed once older than the grace period.
func (m *Manager) sweep(ctx context.Context) {
	// Small artifacts wait in packs for their own files: this places any a
	// crashed process left, and retries any a failure left.
	if err := m.art.blobs.Flush(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("sweep: place pending artifact blobs", "err", err)
	}
	listed := time.Now()
	list, err := m.drv.List(ctx, map[string]string{LabelNamespace: m.ns})
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("sweep: list containers", "err", err)
		}
		return
	}
	rows := map[string]store.Session{}
	if all, err := m.store.Sessions(ctx, m.ns); err == nil {
		for _, r := range all {
			rows[r.ID] = r
		}
	}
	now := time.Now()
	defer m.releaseDisks(ctx)
	m.endVanished(ctx, list, listed, rows, now)
	for _, c := range list {
		if ctx.Err() != nil {
			return
		}
		// By name: a warm container handed to a key is renamed, and
		// keeps the labels it was made with.
		pool := strings.HasPrefix(c.Name, m.ns+"_pool_")
		old := now.Sub(c.Created) > m.grace
		// Each session keeps the idle timeout it was started with,
		// whichever manager sweeps: one started with a short timeout does
		// not evict the sessions of one with a long one.
		timeout := m.idleTimeoutOf(c)
		switch {
		case pool && m.pool.owns(c.ID):
		case !c.Running && old:
			// Stopped or dead (or created and never started): no
			// manager can use it, whatever its image.
			m.log.Info("remove unusable container", "container_id", shortID(c.ID), "reason", deathReason(c, m.image.ID))
			m.removeBestEffort(c.ID)
		case pool:
			// Another manager's warm container: evicted like an idle
			// session, which it is, unless it was handed to a key since
			// the list was taken (renamed: a session now).
			if timeout > 0 && now.Sub(c.Created) > timeout && m.stillWarm(ctx, c.ID) {
				m.removeBestEffort(c.ID)
			}
		default:
			// A running session, this manager's image or another's
			// (another manager may be using it): only its own idle
			// timeout removes it.
			id, ok := strings.CutPrefix(c.Name, m.ns+"_")
			if ok && m.expireIfDue(ctx, id, c, rows[id], now) {
				continue
			}
			// A session the idle sweep paused goes after its
			// IDLE_PAUSED_TIMEOUT_S; one a caller paused is idle on
			// purpose.
			if ok && c.Paused {
				m.removePausedIfDue(ctx, id, c, rows[id], now)
				continue
			}
			if ok && timeout > 0 {
				m.evictIfIdle(ctx, id, c, rows[id], now, timeout)
			}
		}
	}
}

// endVanished records the end of the sessions whose rows say they live
// but whose containers the engine no longer has (removed behind agentbox's
// back, lost with an engine restart): until then they would count against
// their tenant's quotas (TENANT_MAX_SANDBOXES) for good. A row made or
// used since the list was taken (at listed) is left alone: its container
// may be newer than the list, or renamed from a warm one since; so is one
// younger than the grace period. The next call on such a key says the
// session was lost, as it would have.
func (m *Manager) endVanished(ctx context.Context, list []Container, listed time.Time, rows map[string]store.Session, now time.Time) {
	if m.quota == nil {
		return
	}
	seen := make(map[string]bool, len(list))
	for _, c := range list {
		seen[strings.TrimPrefix(c.Name, m.ns+"_")] = true
	}
	for id, r := range rows {
		if !r.Stopped.IsZero() || seen[id] || !r.Created.Before(listed) || !r.LastUsed.Before(listed) ||
			now.Sub(r.Created) <= m.grace || now.Sub(r.LastUsed) <= m.grace {
			continue
		}
		m.markStopped(ctx, id, r.ContainerID, "lost: removed")
	}
}

// stillWarm reports whether container id still has a warm container's
// name: the sweep's list may be older than its handing to a key.
func (m *Manager) stillWarm(ctx context.Context, id string) bool {
	c, err := m.drv.Inspect(ctx, id)
	return err == nil && strings.HasPrefix(c.Name, m.ns+"_pool_")
}

// idleTimeoutOf returns the idle timeout container c was started with, or
// this manager's for a container from before the label existed.
func (m *Manager) idleTimeoutOf(c Container) time.Duration {
	s, ok := c.Labels[LabelIdleTimeout]
	if !ok {
		return m.cfg.IdleTimeout
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return m.cfg.IdleTimeout
	}
	return time.Duration(n) * time.Second
}

// evictIfIdle removes session id's container if nobody used it for
// IDLE_TIMEOUT_S, unless this process is using it right now.
func (m *Manager) evictIfIdle(ctx context.Context, id string, c Container, row store.Session, now time.Time, timeout time.Duration) {
	last := c.Created
	if row.ContainerID == c.ID && row.LastUsed.After(last) {
		last = row.LastUsed
	}
	m.mu.Lock()
	e := m.sessions[id]
	if e != nil && e.lastUsed.After(last) {
		last = e.lastUsed
	}
	busy := e != nil && e.commands > 0
	m.mu.Unlock()
	if busy {
		return
	}
	if now.Sub(last) <= timeout {
		return
	}
	if m.runningElsewhere(ctx, id) {
		return
	}
	// Commands leave no intent: the container itself says whether one
	// runs (started by another manager; this one's are counted in e).
	// A container that cannot be asked is not kept for it.
	if n, err := m.commandsRunning(ctx, c.ID); err != nil {
		// A container paused since the list was taken cannot be asked
		// either; it is idle on purpose.
		if now, ierr := m.drv.Inspect(ctx, c.ID); ierr == nil && now.Paused {
			return
		}
		m.log.Warn("sweep: look for commands in progress", "session_id", id, "err", err)
	} else if n > 0 {
		return
	}
	// row was read before the probe: a command that ended since was
	// recorded before its supervisor left (see sandbox-image/agentbox_supervisor.py), so a
	// fresh read sees its use; a pause since is recorded before the
	// container freezes.
	fresh, err := m.store.Session(ctx, m.ns, id)
	recorded := err == nil && fresh.ContainerID == c.ID
	// Evicted (or stopped) by a process that then failed to remove it, or
	// died first: nothing can claim it again, so it is removed here.
	decided := recorded && !fresh.Stopped.IsZero() && decidedEnd(fresh.StopReason)
	switch {
	case decided:
	case recorded:
		if !fresh.Paused.IsZero() {
			return
		}
		if fresh.LastUsed.After(last) {
			last = fresh.LastUsed
			if time.Since(last) <= timeout {
				return
			}
		}
	case err == nil || errors.Is(err, store.ErrNotFound):
		// No process has recorded this container: one may be starting
		// it (the row is written once its kernel answers, which takes a
		// while on a loaded host), and its idle time has not begun.
		// Only an opening that gave up leaves it so for longer than an
		// opening may take.
		if time.Since(c.Created) <= max(timeout, startTimeout)+listedCreatedSlack {
			return
		}
	default:
		m.log.Warn("sweep: read the session's last use", "session_id", id, "err", err)
		return
	}
	if e != nil {
		select {
		case e.turn <- struct{}{}: // not in use: hold it while evicting
			defer func() { <-e.turn }()
		default:
			return
		}
	}
	if recorded && !decided && m.idleActionOf(c) == config.IdlePause && m.pauseIdle(ctx, id, c, last) {
		return // paused instead (IDLE_ACTION=pause), or left as it is
	}
	// Idle until now, not the sweep's start: the probe may have taken a
	// while.
	idle := time.Since(last).Round(time.Second)
	reason := fmt.Sprintf("%s: evicted after %s unused (its idle timeout)", stopIdle, idle)
	if recorded && !decided {
		// Decided in the database, against a use another process begins
		// meanwhile: its execution's start is refused once this holds
		// (store.ErrEnded), and this fails once that started.
		evicted, err := m.store.EvictSession(ctx, m.ns, id, c.ID, last, time.Now(), reason)
		if err != nil {
			m.log.Warn("evict idle session", "session_id", id, "err", err)
			return
		}
		if !evicted {
			return // used since, or paused, or ended by another process
		}
		if err := m.bumpEpoch(); err != nil {
			m.log.Warn("evict idle session", "session_id", id, "err", err)
		}
	}
	if e != nil {
		m.drop(e)
		if e.client != nil {
			e.client.Close()
		}
	}
	m.log.Info("evict idle session", "session_id", id, "container_id", shortID(c.ID), "idle", idle)
	if err := m.drv.Remove(ctx, c.ID); err != nil && !errors.Is(err, ErrContainerNotFound) {
		// Recorded as ended: the next process to open the key removes it.
		m.log.Warn("evict idle session", "session_id", id, "err", err)
		return
	}
	m.markStopped(ctx, id, c.ID, reason)
}

// runningElsewhere reports whether another live manager is running an
// execution in session id now (an open intent whose owner lives): the
// session is busy, however long ago it was last used. Unsure is busy.
func (m *Manager) runningElsewhere(ctx context.Context, id string) bool {
	open, err := m.store.OpenIntents(ctx, m.ns, id)
	if err != nil {
		m.log.Warn("sweep: look for executions in progress", "session_id", id, "err", err)
		return true
	}
	for _, in := range open {
		if m.owner.otherAlive(in.Owner) {
			return true
		}
	}
	return false
}

// busyElsewhere is runningElsewhere once the executions of other processes
// that have answered their callers have had the time to record it: a call
// answers before its history row is written (Manager.Exec), so for a
// moment after it returned its intent is still open, and a Pause right
// after another process's call must not hear ErrBusy for it.
func (m *Manager) busyElsewhere(ctx context.Context, id string) bool {
	deadline := time.Now().Add(recordGrace)
	for m.runningElsewhere(ctx, id) {
		if time.Now().After(deadline) {
			return true
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return true
		}
	}
	return false
}

// recordGrace bounds how long busyElsewhere waits for another process's
// answered execution to be recorded: a write to the database, far less on
// any machine that serves at all; an execution still running is busy
// after it (TestPauseBusyElsewhere).
const recordGrace = 500 * time.Millisecond

// listedCreatedSlack is how much later than the engine's list says a
// container may have been created: the list gives whole seconds.
const listedCreatedSlack = time.Second

// stopIdle begins the stop reason of an evicted session.
const stopIdle = "idle"

// stopStopped is the stop reason of a session stopped by a caller.
const stopStopped = "stopped"
