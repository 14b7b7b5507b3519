package store_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
)

const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// storedTraceID reads the trace_id column of an execution as stored.
func storedTraceID(t *testing.T, s *store.Store, execID string) sql.NullString {
	t.Helper()
	var v sql.NullString
	if err := s.DB().QueryRowContext(t.Context(), `SELECT trace_id FROM executions WHERE exec_id = ?`, execID).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTraceID records executions and commands with and without a trace id:
// it reads back as recorded, and none is stored as NULL, not "".
func TestTraceID(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	zero := 0
	tests := []struct {
		name    string
		e       store.Execution
		command bool
	}{
		{"execution traced", store.Execution{ExecID: "x1", TraceID: traceID}, false},
		{"execution untraced", store.Execution{ExecID: "x2"}, false},
		{"command traced", store.Execution{ExecID: "c1", TraceID: traceID, ExitCode: &zero}, true},
		{"command untraced", store.Execution{ExecID: "c2", ExitCode: &zero}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.e
			e.Namespace, e.SessionID = "ns", "s"
			record := s.RecordExecution
			if tt.command {
				record = s.RecordCommand
			}
			if err := record(ctx, &e); err != nil {
				t.Fatal(err)
			}
			got, err := s.Execution(ctx, "ns", "s", e.ExecID)
			if err != nil {
				t.Fatal(err)
			}
			if got.TraceID != tt.e.TraceID {
				t.Errorf("TraceID = %q, want %q", got.TraceID, tt.e.TraceID)
			}
			if v := storedTraceID(t, s, e.ExecID); v.Valid != (tt.e.TraceID != "") || v.String != tt.e.TraceID {
				t.Errorf("stored trace_id = %+v, want %q (NULL when empty)", v, tt.e.TraceID)
			}
		})
	}
}

// TestMigrationTraceIDUpgrade opens a file made before migration 9 (no
// trace_id column), with history in it, as an upgraded binary does: the
// old rows read back without a trace id, and new ones record theirs.
func TestMigrationTraceIDUpgrade(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentbox.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordExecution(ctx, &store.Execution{Namespace: "ns", SessionID: "s", ExecID: "old", Code: "1 + 1"}); err != nil {
		t.Fatal(err)
	}
	// Back to version 8 (migration 10 undone too).
	if _, err := s.DB().ExecContext(ctx, `ALTER TABLE executions DROP COLUMN trace_id;
		ALTER TABLE sessions DROP COLUMN pause_reason;
		DELETE FROM schema_migrations WHERE version >= 9`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = store.Open(ctx, path)
	if err != nil {
		t.Fatalf("open after downgrade: %v", err)
	}
	defer s.Close()
	if got := migrationRows(t, s); got[len(got)-1] < 9 {
		t.Errorf("schema_migrations = %v, want 9 applied", got)
	}
	old, err := s.Execution(ctx, "ns", "s", "old")
	if err != nil {
		t.Fatalf("history lost in the upgrade: %v", err)
	}
	if old.Code != "1 + 1" || old.TraceID != "" {
		t.Errorf("old row = %+v, want its code and no trace id", old)
	}
	if err := s.RecordExecution(ctx, &store.Execution{Namespace: "ns", SessionID: "s", ExecID: "new", TraceID: traceID}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Execution(ctx, "ns", "s", "new"); err != nil || got.TraceID != traceID {
		t.Errorf("new row after upgrade: %+v, %v; want trace id %s", got, err, traceID)
	}
}
