package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// Execution is the record of one execution in a session's history.
type Execution struct {
	Seq int64 // position in the whole history, assigned by RecordExecution

	Namespace  string
	SessionID  string
	SessionKey string
	ExecID     string // the caller's id for the execution; retries reuse it

	ExecutionCount int
	Code           string
	Stdout         string
	Stderr         string
	Outputs        []kernel.Output
	Error          *kernel.Exception // the Python exception; nil when none

	Started  time.Time
	Duration time.Duration

	TimedOut        bool
	Interrupted     bool
	KernelRestarted bool
	StateLost       bool
	Replayed        bool

	Artifacts json.RawMessage // opaque JSON array from the caller; nil is stored as []

	// Kind is "" for Python code run by the kernel, KindShell for a shell
	// command, whose line is in Code (see RecordCommand).
	Kind string
	// ExitCode is a shell command's exit status; nil for Python.
	ExitCode *int
	// TraceID is the W3C trace id (32 hex digits) of the trace the
	// execution ran in; "" when none was recorded (stored as NULL).
	TraceID string
}

// RecordExecution appends e to the history and sets e.Seq. In the same
// transaction the session's row, if any, records the use: last used is
// when e ended (never moved back) and its execution count e's. Code, Stdout
// and Stderr longer than MaxCode and MaxOutput, and images larger than
// MaxOutput, are cut in what is stored; e itself keeps them whole.
func (s *Store) RecordExecution(ctx context.Context, e *Execution) error {
	fail := func(err error) error {
		return fmt.Errorf("record execution %s/%s/%s: %w", e.Namespace, e.SessionID, e.ExecID, err)
	}
	outputs, err := json.Marshal(capOutputs(e.Outputs, s.MaxOutput))
	if err != nil {
		return fail(err)
	}
	var exc any // NULL when there is no exception
	if e.Error != nil {
		b, err := json.Marshal(e.Error)
		if err != nil {
			return fail(err)
		}
		exc = string(b)
	}
	artifacts := string(e.Artifacts)
	if e.Artifacts == nil {
		artifacts = "[]"
	} else if !json.Valid(e.Artifacts) {
		return fail(errors.New("artifacts are not valid JSON"))
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	res, err := tx.StmtContext(ctx, s.hot.insertExecution).ExecContext(ctx,
		e.Namespace, e.SessionID, e.SessionKey, e.ExecID, e.ExecutionCount,
		capText(e.Code, s.MaxCode), capText(e.Stdout, s.MaxOutput), capText(e.Stderr, s.MaxOutput),
		string(outputs), exc, formatTime(e.Started), int64(e.Duration),
		e.TimedOut, e.Interrupted, e.KernelRestarted, e.StateLost, e.Replayed, artifacts, nullText(e.TraceID),
		e.Namespace, e.SessionID, e.ExecID)
	if err != nil {
		return fail(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fail(err)
	} else if n == 0 {
		var seq int64
		if err := tx.QueryRowContext(ctx, `SELECT seq FROM executions WHERE namespace = ? AND session_id = ? AND exec_id = ?`,
			e.Namespace, e.SessionID, e.ExecID).Scan(&seq); err != nil {
			return fail(err)
		}
		e.Seq = seq
		return nil
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return fail(err)
	}
	if _, err := tx.StmtContext(ctx, s.hot.touchExecution).ExecContext(ctx,
		formatTime(e.Started.Add(e.Duration)), e.ExecutionCount, e.Namespace, e.SessionID); err != nil {
		return fail(err)
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	e.Seq = seq
	return nil
}

// executionColumns is the column list scanExecution reads.
const executionColumns = `seq, namespace, session_id, session_key, exec_id, execution_count, code, stdout,
	stderr, outputs, error, started, duration_ns, timed_out, interrupted, kernel_restarted, state_lost,
	replayed, artifacts, kind, exit_code, trace_id`

// Executions returns the history of a session, oldest first: all of it when
// limit <= 0, else its last limit executions.
func (s *Store) Executions(ctx context.Context, ns, sessionID string, limit int) ([]Execution, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.db.QueryContext(ctx, `SELECT * FROM (
		SELECT `+executionColumns+` FROM executions WHERE namespace = ? AND session_id = ?
		ORDER BY seq DESC LIMIT ?) ORDER BY seq`, ns, sessionID, limit)
	if err != nil {
		return nil, fmt.Errorf("list executions %s/%s: %w", ns, sessionID, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("list executions %s/%s: %w", ns, sessionID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list executions %s/%s: %w", ns, sessionID, err)
	}
	return out, nil
}

// Execution returns the latest execution of the session with exec id
// execID, or ErrNotFound.
func (s *Store) Execution(ctx context.Context, ns, sessionID, execID string) (Execution, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+executionColumns+` FROM executions
		WHERE namespace = ? AND session_id = ? AND exec_id = ? ORDER BY seq DESC LIMIT 1`, ns, sessionID, execID)
	e, err := scanExecution(row)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Execution{}, fmt.Errorf("get execution %s/%s/%s: %w", ns, sessionID, execID, err)
	}
	return e, nil
}

// scanExecution reads one row of executionColumns. Empty Outputs read as nil.
func scanExecution(sc scanner) (Execution, error) {
	var (
		e                          Execution
		outputs, started, artifact string
		exc                        sql.NullString
		dur                        int64
		exit                       sql.NullInt64
		traceID                    sql.NullString
	)
	err := sc.Scan(&e.Seq, &e.Namespace, &e.SessionID, &e.SessionKey, &e.ExecID, &e.ExecutionCount,
		&e.Code, &e.Stdout, &e.Stderr, &outputs, &exc, &started, &dur,
		&e.TimedOut, &e.Interrupted, &e.KernelRestarted, &e.StateLost, &e.Replayed, &artifact,
		&e.Kind, &exit, &traceID)
	if err != nil {
		return Execution{}, err
	}
	if err := json.Unmarshal([]byte(outputs), &e.Outputs); err != nil {
		return Execution{}, fmt.Errorf("outputs: %w", err)
	}
	if len(e.Outputs) == 0 {
		e.Outputs = nil
	}
	if exc.Valid {
		e.Error = new(kernel.Exception)
		if err := json.Unmarshal([]byte(exc.String), e.Error); err != nil {
			return Execution{}, fmt.Errorf("error: %w", err)
		}
	}
	if e.Started, err = parseTime(started); err != nil {
		return Execution{}, err
	}
	e.Duration = time.Duration(dur)
	e.Artifacts = json.RawMessage(artifact)
	if e.Kind == KindPython {
		e.Kind = ""
	}
	if exit.Valid {
		n := int(exit.Int64)
		e.ExitCode = &n
	}
	e.TraceID = traceID.String
	return e, nil
}

// nullText is s, or NULL when s is empty.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
