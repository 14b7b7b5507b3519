package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Session is the record of one session: its container and its state.
type Session struct {
	Namespace string // the tenant or caller group; "" is a namespace like any other
	ID        string // filesystem-safe id derived from Key by the caller
	Key       string // the caller's session key

	ContainerID string
	Image       string
	Storage     string // where the session's files live

	Created        time.Time
	LastUsed       time.Time
	ExecutionCount int

	Stopped    time.Time // zero while running
	StopReason string    // why it stopped: "idle", "stopped", "lost"...

	Limits map[string]string // resource limits by name: "memory", "cpus", "pids"...

	Expires time.Time // past it the session is removed; zero: never (see RenewSession)
	Paused  time.Time // when it was paused; zero while not paused (see SetPaused)
	// PauseReason is PauseIdle when the idle sweep paused it (see
	// PauseIdleSession), "" when a caller did or it is not paused.
	PauseReason string
}

// PutSession inserts or replaces the session with s's namespace and id, as
// running: Stopped, StopReason, Paused and PauseReason are cleared,
// whatever s holds.
func (s *Store) PutSession(ctx context.Context, sess Session) error {
	if sess.ID == "" {
		return fmt.Errorf("put session %q: empty id", sess.Key)
	}
	limits, err := json.Marshal(sess.Limits)
	if err != nil {
		return fmt.Errorf("put session %s: %w", sess.ID, err)
	}
	if sess.Limits == nil {
		limits = []byte("{}")
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO sessions
		(namespace, id, key, container_id, image, storage, created, last_used, execution_count, stopped, stop_reason, limits, expires, paused)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', ?, ?, 0)
		ON CONFLICT (namespace, id) DO UPDATE SET
			key = excluded.key, container_id = excluded.container_id, image = excluded.image,
			storage = excluded.storage, created = excluded.created, last_used = excluded.last_used,
			execution_count = excluded.execution_count, stopped = '', stop_reason = '', limits = excluded.limits,
			expires = excluded.expires, paused = 0, pause_reason = ''`,
		sess.Namespace, sess.ID, sess.Key, sess.ContainerID, sess.Image, sess.Storage,
		formatTime(sess.Created), formatTime(sess.LastUsed), sess.ExecutionCount, string(limits), unixMilli(sess.Expires))
	if err != nil {
		return fmt.Errorf("put session %s: %w", sess.ID, err)
	}
	return nil
}

// TouchSession records that the session was used at lastUsed and has run
// executionCount executions. It returns ErrNotFound if there is no such
// session.
func (s *Store) TouchSession(ctx context.Context, ns, id string, lastUsed time.Time, executionCount int) error {
	return s.updateSession(ctx, "touch", ns, id,
		`UPDATE sessions SET last_used = ?, execution_count = ? WHERE namespace = ? AND id = ?`,
		formatTime(lastUsed), executionCount, ns, id)
}

// UseSession records that the session's container containerID was used at
// at (a command or a file operation, which leave the execution count as it
// is). It returns ErrEnded if the row records that container's end, or
// names another (an eviction decided meanwhile: see EvictSession), and
// ErrNotFound if there is no such session.
func (s *Store) UseSession(ctx context.Context, ns, id, containerID string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET last_used = max(last_used, ?)
		WHERE namespace = ? AND id = ? AND container_id = ? AND stopped = ''`,
		formatTime(at), ns, id, containerID)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err == nil && n == 0 {
		err = ErrNotFound
		var one int
		if qerr := s.db.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE namespace = ? AND id = ?`, ns, id).Scan(&one); qerr == nil {
			err = ErrEnded
		}
	}
	if err != nil {
		return fmt.Errorf("use session %s/%s (container %.12s): %w", ns, id, containerID, err)
	}
	return nil
}

// StopSession records that the session stopped at at, for reason. It returns
// ErrNotFound if there is no such session.
func (s *Store) StopSession(ctx context.Context, ns, id string, at time.Time, reason string) error {
	return s.updateSession(ctx, "stop", ns, id,
		`UPDATE sessions SET stopped = ?, stop_reason = ? WHERE namespace = ? AND id = ?`,
		formatTime(at), reason, ns, id)
}

// EndSession records that container containerID of the session stopped at
// at, for reason, and that its executions with no result recorded will
// never have one. The row is left alone unless it still names that
// container as live: a process that saw an old container go never ends
// the one that replaced it, nor rewrites the reason first recorded. It
// reports whether it ended the row.
func (s *Store) EndSession(ctx context.Context, ns, id, containerID string, at time.Time, reason string) (bool, error) {
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("end session %s/%s (container %.12s): %w", ns, id, containerID, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE sessions SET stopped = ?, stop_reason = ?
		WHERE namespace = ? AND id = ? AND container_id = ? AND stopped = ''`,
		formatTime(at), reason, ns, id, containerID)
	if err != nil {
		return fail(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fail(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE intents SET lost = ?
		WHERE namespace = ? AND session_id = ? AND container_id = ? AND lost IS NULL
		AND NOT EXISTS (SELECT 1 FROM executions x WHERE x.namespace = intents.namespace AND x.session_id = intents.session_id AND x.exec_id = intents.exec_id)`,
		"the session ended ("+reason+") before its result was recorded", ns, id, containerID); err != nil {
		return fail(err)
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return n == 1, nil
}

// EvictSession records the end of session id's container containerID for
// idleness, if nothing used it after seen: its row's last use is no later,
// no execution in it started later, it is not paused and has not ended. One
// statement, so that a use that begins as the sweep decides either shows
// here or is refused (BeginExecution). It reports whether it evicted; the
// caller then removes the container and calls EndSession for what ran.
func (s *Store) EvictSession(ctx context.Context, ns, id, containerID string, seen, at time.Time, reason string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET stopped = ?, stop_reason = ?
		WHERE namespace = ? AND id = ? AND container_id = ? AND stopped = '' AND paused = 0 AND last_used <= ?
		AND NOT EXISTS (SELECT 1 FROM intents i
			WHERE i.namespace = sessions.namespace AND i.session_id = sessions.id AND i.started > ?)`,
		formatTime(at), reason, ns, id, containerID, formatTime(seen), formatTime(seen))
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return false, fmt.Errorf("evict session %s/%s (container %.12s): %w", ns, id, containerID, err)
	}
	return n == 1, nil
}

// updateSession runs an UPDATE of one session row.
func (s *Store) updateSession(ctx context.Context, op, ns, id, query string, args ...any) error {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("%s session %s/%s: %w", op, ns, id, err)
	}
	return nil
}

// sessionColumns is the column list scanSession reads.
const sessionColumns = `namespace, id, key, container_id, image, storage, created, last_used,
	execution_count, stopped, stop_reason, limits, expires, paused, pause_reason`

// Session returns the session with namespace ns and id id, or ErrNotFound.
func (s *Store) Session(ctx context.Context, ns, id string) (Session, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE namespace = ? AND id = ?`, ns, id)
	sess, err := scanSession(row)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Session{}, fmt.Errorf("get session %s/%s: %w", ns, id, err)
	}
	return sess, nil
}

// Sessions returns the sessions of namespace ns, or of every namespace when
// ns is "", running and stopped, most recently used first.
func (s *Store) Sessions(ctx context.Context, ns string) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE ? = '' OR namespace = ? ORDER BY last_used DESC, namespace, id`, ns, ns)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanSession reads one row of sessionColumns. An empty Limits reads as nil.
func scanSession(sc scanner) (Session, error) {
	var (
		sess                       Session
		created, used, stop, limit string
		expires, paused            int64
	)
	err := sc.Scan(&sess.Namespace, &sess.ID, &sess.Key, &sess.ContainerID, &sess.Image, &sess.Storage,
		&created, &used, &sess.ExecutionCount, &stop, &sess.StopReason, &limit, &expires, &paused, &sess.PauseReason)
	if err != nil {
		return Session{}, err
	}
	if sess.Created, err = parseTime(created); err != nil {
		return Session{}, err
	}
	if sess.LastUsed, err = parseTime(used); err != nil {
		return Session{}, err
	}
	if sess.Stopped, err = parseTime(stop); err != nil {
		return Session{}, err
	}
	if err := json.Unmarshal([]byte(limit), &sess.Limits); err != nil {
		return Session{}, fmt.Errorf("limits: %w", err)
	}
	if len(sess.Limits) == 0 {
		sess.Limits = nil
	}
	sess.Expires, sess.Paused = fromUnixMilli(expires), fromUnixMilli(paused)
	return sess, nil
}
