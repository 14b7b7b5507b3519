package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrExpired reports a session whose time to live has passed: it cannot be
// renewed, only replaced.
var ErrExpired = errors.New("session expired")

// unixMilli is t in Unix milliseconds, 0 for the zero time.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// PauseIdle is the PauseReason of a session the idle sweep paused.
const PauseIdle = "idle"

// SetPaused records that the running session was paused by a caller at
// at (a pause by the idle sweep becomes a caller's), or, with the zero
// time, that it runs again. ErrNotFound if no running session has that
// namespace and id.
func (s *Store) SetPaused(ctx context.Context, ns, id string, at time.Time) error {
	return s.updateSession(ctx, "pause", ns, id,
		`UPDATE sessions SET paused = ?, pause_reason = '' WHERE namespace = ? AND id = ? AND stopped = ''`,
		unixMilli(at), ns, id)
}

// PauseIdleSession records that the idle sweep paused session id's
// container containerID at at, if nothing used it after seen: as
// EvictSession decides an eviction, in one statement against a use that
// begins meanwhile. It reports whether it did; the caller then freezes
// the container (or, failing, clears the pause with SetPaused).
func (s *Store) PauseIdleSession(ctx context.Context, ns, id, containerID string, seen, at time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET paused = ?, pause_reason = ?
		WHERE namespace = ? AND id = ? AND container_id = ? AND stopped = '' AND paused = 0 AND last_used <= ?
		AND NOT EXISTS (SELECT 1 FROM intents i
			WHERE i.namespace = sessions.namespace AND i.session_id = sessions.id AND i.started > ?)`,
		unixMilli(at), PauseIdle, ns, id, containerID, formatTime(seen), formatTime(seen))
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return false, fmt.Errorf("pause idle session %s/%s (container %.12s): %w", ns, id, containerID, err)
	}
	return n == 1, nil
}

// EvictPausedSession records the end of session id's container
// containerID, for reason, if the idle sweep paused it at paused and it
// has stayed so: a resume (or a caller's pause) since leaves it alone. It
// reports whether it ended the row; the caller then removes the container.
func (s *Store) EvictPausedSession(ctx context.Context, ns, id, containerID string, paused, at time.Time, reason string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET stopped = ?, stop_reason = ?
		WHERE namespace = ? AND id = ? AND container_id = ? AND stopped = '' AND pause_reason = ? AND paused = ?`,
		formatTime(at), reason, ns, id, containerID, PauseIdle, unixMilli(paused))
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return false, fmt.Errorf("evict paused session %s/%s (container %.12s): %w", ns, id, containerID, err)
	}
	return n == 1, nil
}

// RenewSession sets the expiry of a running session that has not expired at
// now; the zero expires means never. In one statement, so that a sweep that
// expires the session (ExpireSession) and a renewal never both win. It
// returns ErrExpired for a session past its expiry, ErrNotFound for none
// or one that stopped.
func (s *Store) RenewSession(ctx context.Context, ns, id string, expires, now time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET expires = ?
		WHERE namespace = ? AND id = ? AND stopped = '' AND (expires = 0 OR expires > ?)`,
		unixMilli(expires), ns, id, now.UnixMilli())
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("renew session %s/%s: %w", ns, id, err)
	}
	if n == 1 {
		return nil
	}
	sess, err := s.Session(ctx, ns, id)
	switch {
	case err != nil:
		return fmt.Errorf("renew session %s/%s: %w", ns, id, err)
	case sess.Stopped.IsZero():
		return fmt.Errorf("renew session %s/%s: %w at %s", ns, id, ErrExpired, sess.Expires.Format(time.RFC3339))
	}
	return fmt.Errorf("renew session %s/%s: stopped (%s): %w", ns, id, sess.StopReason, ErrNotFound)
}

// ExpireSession records that the session expired, at now, for reason, if
// its row still names containerID, runs, and has an expiry at or before
// now. It reports whether it did: the caller that gets true removes the
// container; a renewal that came first leaves it false.
func (s *Store) ExpireSession(ctx context.Context, ns, id, containerID string, now time.Time, reason string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET stopped = ?, stop_reason = ?
		WHERE namespace = ? AND id = ? AND container_id = ? AND stopped = '' AND expires != 0 AND expires <= ?`,
		formatTime(now), reason, ns, id, containerID, now.UnixMilli())
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return false, fmt.Errorf("expire session %s/%s: %w", ns, id, err)
	}
	return n == 1, nil
}

// ResumeSession records that the running session was resumed at at: it is
// no longer paused, and at counts as its last use, so the idle sweep does
// not take a session for idle because it was paused long. ErrNotFound if no
// running session has that namespace and id.
func (s *Store) ResumeSession(ctx context.Context, ns, id string, at time.Time) error {
	return s.updateSession(ctx, "resume", ns, id,
		`UPDATE sessions SET paused = 0, pause_reason = '', last_used = ? WHERE namespace = ? AND id = ? AND stopped = ''`,
		formatTime(at), ns, id)
}

// Liveness is what a call on a session must know before it reaches the
// kernel: which container the row names, whether it stopped, when it
// expires and whether it is paused.
type Liveness struct {
	ContainerID string
	Stopped     bool
	Expires     time.Time // zero: never
	Paused      time.Time // zero: not paused
	PauseReason string    // PauseIdle: the idle sweep paused it; its next call resumes it
}

// SessionLiveness reads a session's Liveness: a narrow read, since it runs
// before every call on a session. ErrNotFound if there is no such session.
func (s *Store) SessionLiveness(ctx context.Context, ns, id string) (Liveness, error) {
	var (
		l               Liveness
		stopped         string
		expires, paused int64
	)
	err := s.db.QueryRowContext(ctx, `SELECT container_id, stopped, expires, paused, pause_reason FROM sessions WHERE namespace = ? AND id = ?`, ns, id).
		Scan(&l.ContainerID, &stopped, &expires, &paused, &l.PauseReason)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Liveness{}, fmt.Errorf("session liveness %s/%s: %w", ns, id, err)
	}
	l.Stopped, l.Expires, l.Paused = stopped != "", fromUnixMilli(expires), fromUnixMilli(paused)
	return l, nil
}
