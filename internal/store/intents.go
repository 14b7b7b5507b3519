package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrExists reports that a row with the same key is already there: an
// execution id that was started before.
var ErrExists = errors.New("already exists")

// ErrEnded reports that the session's row records the end of the container
// a call was about to use: another process stopped, evicted or expired it.
var ErrEnded = errors.New("the session's container has ended")

// Intent is an execution as written before its code reaches the kernel.
type Intent struct {
	Namespace   string
	SessionID   string
	SessionKey  string
	ExecID      string
	CodeSHA256  string // hex SHA-256 of the code, whole
	Code        string // the code, cut to MaxCode
	ContainerID string // the container it was sent to
	Owner       string // the manager that sent it
	Started     time.Time
	// Lost is why the outcome will never be known; "" while it may.
	Lost string
	// Recorded reports that its result is in the history (read only).
	Recorded bool
}

// BeginExecution writes in before its code runs. ErrExists means the id was
// started before (in this session and namespace), by any process: the
// caller must not run it.
func (s *Store) BeginExecution(ctx context.Context, in Intent) error {
	res, err := s.hot.beginExecution.ExecContext(ctx,
		in.Namespace, in.SessionID, in.ExecID, in.SessionKey, in.CodeSHA256, capText(in.Code, s.MaxCode), in.ContainerID, in.Owner, formatTime(in.Started),
		in.Namespace, in.SessionID, in.ContainerID)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		if isConstraint(err) {
			err = ErrExists
		}
		return fmt.Errorf("begin execution %s/%s/%s: %w", in.Namespace, in.SessionID, in.ExecID, err)
	}
	if n == 0 {
		return fmt.Errorf("begin execution %s/%s/%s: container %.12s: %w", in.Namespace, in.SessionID, in.ExecID, in.ContainerID, ErrEnded)
	}
	return nil
}

const intentColumns = `namespace, session_id, session_key, exec_id, code_sha256, code, container_id, owner, started, lost,
	EXISTS (SELECT 1 FROM executions x WHERE x.namespace = i.namespace AND x.session_id = i.session_id AND x.exec_id = i.exec_id)`

// Intent returns the intent of an execution id, or ErrNotFound.
func (s *Store) Intent(ctx context.Context, ns, sessionID, execID string) (Intent, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+intentColumns+` FROM intents i
		WHERE namespace = ? AND session_id = ? AND exec_id = ?`, ns, sessionID, execID)
	in, err := scanIntent(row)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Intent{}, fmt.Errorf("get intent %s/%s/%s: %w", ns, sessionID, execID, err)
	}
	return in, nil
}

// OpenIntents returns a session's executions that started and whose result
// is neither recorded nor known lost, oldest first.
func (s *Store) OpenIntents(ctx context.Context, ns, sessionID string) ([]Intent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+intentColumns+` FROM intents i
		WHERE namespace = ? AND session_id = ? AND lost IS NULL
		AND NOT EXISTS (SELECT 1 FROM executions x WHERE x.namespace = i.namespace AND x.session_id = i.session_id AND x.exec_id = i.exec_id)
		ORDER BY started`, ns, sessionID)
	if err != nil {
		return nil, fmt.Errorf("open intents %s/%s: %w", ns, sessionID, err)
	}
	defer rows.Close()
	var out []Intent
	for rows.Next() {
		in, err := scanIntent(rows)
		if err != nil {
			return nil, fmt.Errorf("open intents %s/%s: %w", ns, sessionID, err)
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("open intents %s/%s: %w", ns, sessionID, err)
	}
	return out, nil
}

// LoseIntents records why the open intents of a session (all of them when
// execID is "", else that one) will never have a result. Recorded ones are
// left alone.
func (s *Store) LoseIntents(ctx context.Context, ns, sessionID, execID, reason string) error {
	q := `UPDATE intents SET lost = ? WHERE namespace = ? AND session_id = ? AND lost IS NULL
		AND NOT EXISTS (SELECT 1 FROM executions x WHERE x.namespace = intents.namespace AND x.session_id = intents.session_id AND x.exec_id = intents.exec_id)`
	args := []any{reason, ns, sessionID}
	if execID != "" {
		q += ` AND exec_id = ?`
		args = append(args, execID)
	}
	if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("lose intents %s/%s: %w", ns, sessionID, err)
	}
	return nil
}

func scanIntent(sc scanner) (Intent, error) {
	var in Intent
	var started string
	var lost sql.NullString
	if err := sc.Scan(&in.Namespace, &in.SessionID, &in.SessionKey, &in.ExecID, &in.CodeSHA256, &in.Code, &in.ContainerID, &in.Owner, &started, &lost, &in.Recorded); err != nil {
		return Intent{}, err
	}
	in.Lost = lost.String
	var err error
	in.Started, err = parseTime(started)
	return in, err
}

// isConstraint reports a UNIQUE or PRIMARY KEY violation (SQLite's
// SQLITE_CONSTRAINT or one of its extended codes).
func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}
