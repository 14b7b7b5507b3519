package store

import (
	"context"
	"fmt"
)

// Kinds of history rows.
const (
	KindPython = "python" // code run by the kernel: Execution.Kind "" reads back
	KindShell  = "shell"  // a shell command run beside it
)

// RecordCommand appends a shell command to the history (Kind is set to
// KindShell, Code holds the command line, ExitCode its status) and sets
// e.Seq. The session's row, if any, records the use (last used, never
// moved back) but keeps its execution count: the kernel's counter does not
// move for commands. A command id is recorded once. Code, Stdout and Stderr
// are cut as RecordExecution cuts them.
func (s *Store) RecordCommand(ctx context.Context, e *Execution) error {
	fail := func(err error) error {
		return fmt.Errorf("record command %s/%s/%s: %w", e.Namespace, e.SessionID, e.ExecID, err)
	}
	if e.ExitCode == nil {
		return fail(fmt.Errorf("no exit code"))
	}
	e.Kind = KindShell
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO executions
		(namespace, session_id, session_key, exec_id, execution_count, code, stdout, stderr, outputs, error,
		 started, duration_ns, timed_out, interrupted, kernel_restarted, state_lost, replayed, artifacts, kind, exit_code, trace_id)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, '[]', NULL, ?, ?, ?, ?, 0, 0, 0, '[]', 'shell', ?, ?
		WHERE NOT EXISTS (SELECT 1 FROM executions WHERE namespace = ? AND session_id = ? AND exec_id = ?)`,
		e.Namespace, e.SessionID, e.SessionKey, e.ExecID, e.ExecutionCount,
		capText(e.Code, s.MaxCode), capText(e.Stdout, s.MaxOutput), capText(e.Stderr, s.MaxOutput),
		formatTime(e.Started), int64(e.Duration), e.TimedOut, e.Interrupted, *e.ExitCode, nullText(e.TraceID),
		e.Namespace, e.SessionID, e.ExecID)
	if err != nil {
		return fail(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fail(err)
	} else if n == 0 {
		if err := tx.QueryRowContext(ctx, `SELECT seq FROM executions WHERE namespace = ? AND session_id = ? AND exec_id = ?`,
			e.Namespace, e.SessionID, e.ExecID).Scan(&e.Seq); err != nil {
			return fail(err)
		}
		return nil
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return fail(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET last_used = max(last_used, ?) WHERE namespace = ? AND id = ?`,
		formatTime(e.Started.Add(e.Duration)), e.Namespace, e.SessionID); err != nil {
		return fail(err)
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	e.Seq = seq
	return nil
}
