package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// hotStmts are the statements every execution runs, prepared once: SQLite
// spends about as long parsing a statement as running it, and an execution
// through a Manager runs these on its reply path.
type hotStmts struct {
	beginExecution  *sql.Stmt
	insertExecution *sql.Stmt
	touchExecution  *sql.Stmt
}

const (
	// Refused once the row records the end of the container (an eviction
	// claimed by another process's sweep, say): one statement, so that
	// either the intent or the end comes first, never both unseen.
	beginExecutionSQL = `INSERT INTO intents
		(namespace, session_id, exec_id, session_key, code_sha256, code, container_id, owner, started)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?
		WHERE NOT EXISTS (SELECT 1 FROM sessions
			WHERE namespace = ? AND id = ? AND container_id = ? AND stopped != '')`
	// Once per exec id: a result recovered by two processes, or retried
	// after a failure that did commit, is recorded once.
	insertExecutionSQL = `INSERT INTO executions
		(namespace, session_id, session_key, exec_id, execution_count, code, stdout, stderr, outputs, error,
		 started, duration_ns, timed_out, interrupted, kernel_restarted, state_lost, replayed, artifacts, trace_id)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
		WHERE NOT EXISTS (SELECT 1 FROM executions WHERE namespace = ? AND session_id = ? AND exec_id = ?)`
	// Times are fixed-width UTC text, so max() compares them correctly.
	touchExecutionSQL = `UPDATE sessions SET last_used = max(last_used, ?), execution_count = ?
		WHERE namespace = ? AND id = ?`
)

func (h *hotStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&h.beginExecution, beginExecutionSQL},
		{&h.insertExecution, insertExecutionSQL},
		{&h.touchExecution, touchExecutionSQL},
	} {
		st, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			h.close()
			return fmt.Errorf("prepare statements: %w", err)
		}
		*p.stmt = st
	}
	return nil
}

func (h *hotStmts) close() {
	var errs []error
	for _, st := range []*sql.Stmt{h.beginExecution, h.insertExecution, h.touchExecution} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	_ = errors.Join(errs...) // closing the database closes them anyway
}
