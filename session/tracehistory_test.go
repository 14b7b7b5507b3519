package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/session"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTraceIDInHistory runs an execution, a shell command and a background
// command under a caller's span and reads the history back: each row holds
// the caller's trace id when the span is sampled, and none without a
// provider or with a span that is not sampled. In BIND mode session.log
// carries it too.
func TestTraceIDInHistory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		sampler sdktrace.Sampler // nil: no provider at all
		traced  bool
	}{
		{"sampled", sdktrace.AlwaysSample(), true},
		{"not sampled", sdktrace.NeverSample(), false},
		{"no provider", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, func(c *config.Config) { c.SessionStorage = config.StorageBind })
			ctx := context.Background()
			var opts []session.Option
			wantID := ""
			if tt.sampler != nil {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tt.sampler), sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
				t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				opts = append(opts, session.WithTracerProvider(tp))
				c, span := tp.Tracer("test").Start(ctx, "agent turn")
				defer span.End()
				ctx = c
				if tt.traced {
					wantID = span.SpanContext().TraceID().String()
				}
			}
			m := managerFor(t, cfg, namespace(), opts...)
			const key = "traced-history"
			res, err := m.Exec(ctx, key, "6 * 7", session.ExecID("exec-1"))
			if err != nil || res.Error != nil {
				t.Fatalf("exec: %v %+v", err, res)
			}
			run, err := m.Run(ctx, key, session.Command{Line: "true"})
			if err != nil || run.ExitCode != 0 {
				t.Fatalf("run: %v %+v", err, run)
			}
			bg, err := m.StartCommand(ctx, key, session.Command{Line: "exit 3"})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := m.WaitCommand(ctx, key, bg); err != nil || st.Result == nil || st.Result.ExitCode != 3 {
				t.Fatalf("background command: %+v %v", st, err)
			}

			st, err := store.Open(ctx, cfg.ArtifactsDB)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			rows, err := st.Executions(ctx, m.Namespace(), session.ID(key), 0)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range rows {
				got[r.ExecID] = r.TraceID
			}
			for _, id := range []string{"exec-1", run.ID, bg} {
				tid, ok := got[id]
				if !ok {
					t.Errorf("history lacks %s: %v", id, got)
				} else if tid != wantID {
					t.Errorf("history: %s has trace id %q, want %q", id, tid, wantID)
				}
			}

			// session.log: one line per execution and command.
			f, err := os.Open(filepath.Join(cfg.SessionsRoot, session.ID(key), session.LogFile))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			lines := 0
			for sc := bufio.NewScanner(f); sc.Scan(); lines++ {
				var e session.LogEntry
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatalf("session.log: %v", err)
				}
				if e.TraceID != wantID {
					t.Errorf("session.log: %s has trace id %q, want %q", e.ID, e.TraceID, wantID)
				}
			}
			if lines != 3 {
				t.Errorf("session.log has %d lines, want 3", lines)
			}
		})
	}
}
