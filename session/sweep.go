package session

import (
	"context"
	"errors"
	"strings"
	"time"

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
// IDLE_TIMEOUT_S are removed (their BIND folders stay); containers no manager
// can use (stopped, dead, from another image) and warm containers of managers
// that did not clean up are removed once older than the grace period.
func (m *Manager) sweep(ctx context.Context) {
	// Small artifacts wait in packs for their own files: this places any a
	// crashed process left, and retries any a failure left.
	if err := m.art.blobs.Flush(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("sweep: place pending artifact blobs", "err", err)
	}
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
	for _, c := range list {
		if ctx.Err() != nil {
			return
		}
		pool := c.Labels[LabelRole] == RolePool && strings.HasPrefix(c.Name, m.ns+"_pool_")
		old := now.Sub(c.Created) > m.grace
		switch {
		case pool && m.pool.owns(c.ID):
		case !m.usable(c) && old:
			m.log.Info("remove unusable container", "container_id", shortID(c.ID), "reason", deathReason(c, m.image.ID))
			m.removeBestEffort(c.ID)
		case pool:
			// Another manager's warm container: evicted like an idle
			// session, which it is.
			if m.cfg.IdleTimeout > 0 && now.Sub(c.Created) > m.cfg.IdleTimeout {
				m.removeBestEffort(c.ID)
			}
		default:
			id, ok := strings.CutPrefix(c.Name, m.ns+"_")
			if ok && m.cfg.IdleTimeout > 0 {
				m.evictIfIdle(ctx, id, c, rows[id], now)
			}
		}
	}
}

// evictIfIdle removes session id's container if nobody used it for
// IDLE_TIMEOUT_S, unless this process is using it right now.
func (m *Manager) evictIfIdle(ctx context.Context, id string, c Container, row store.Session, now time.Time) {
	last := c.Created
	if row.ContainerID == c.ID && row.LastUsed.After(last) {
		last = row.LastUsed
	}
	m.mu.Lock()
	e := m.sessions[id]
	if e != nil && e.lastUsed.After(last) {
		last = e.lastUsed
	}
	m.mu.Unlock()
	if now.Sub(last) <= m.cfg.IdleTimeout {
		return
	}
	if e != nil {
		select {
		case e.turn <- struct{}{}: // not in use: hold it while evicting
			defer func() { <-e.turn }()
		default:
			return
		}
		m.drop(e)
		if e.client != nil {
			e.client.Close()
		}
	}
	m.log.Info("evict idle session", "session_id", id, "container_id", shortID(c.ID), "idle", now.Sub(last).Round(time.Second))
	if err := m.drv.Remove(ctx, c.ID); err != nil && !errors.Is(err, ErrContainerNotFound) {
		m.log.Warn("evict idle session", "session_id", id, "err", err)
		return
	}
	m.markStopped(ctx, id, "idle")
}
