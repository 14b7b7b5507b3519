package session_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestIsComplete asks the session's Python whether typed input is ready to
// run, by the rules of its interactive prompt, without running anything.
func TestIsComplete(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	mustExec(t, m, "k", "x = 1")
	for _, tt := range []struct {
		src  string
		want session.Completeness
	}{
		{"x = 1", session.Complete},
		{"def f():", session.Incomplete},
		{"def f():\n    return 1", session.Incomplete},
		{"def f():\n    return 1\n", session.Complete},
		{"def f(:", session.Invalid},
		{"1 +", session.Invalid},
		{"s = '''a", session.Incomplete},
		{"s = '''a\n\nb'''", session.Complete},
		{"(1,\n 2", session.Incomplete},
		{"x = [1,\n", session.Incomplete},
		{"@decorator", session.Incomplete},
		{"if True:\n    pass", session.Incomplete},
		{"x = 1\ny = 2", session.Invalid},  // several statements: the kernel runs them as a cell
		{"print('\\d')", session.Complete}, // a SyntaxWarning is no answer
		{"é = 'ü' # ✓", session.Complete},
		{"raise SystemExit", session.Complete}, // compiled, never run
		{"import os; os._exit(3)", session.Complete},
	} {
		got, err := m.IsComplete(context.Background(), "k", tt.src)
		if err != nil || got != tt.want {
			t.Errorf("IsComplete(%q) = %q, %v; want %q", tt.src, got, err, tt.want)
		}
	}
	// Nothing ran: the next execution is the second, x is as it was.
	res := mustExec(t, m, "k", "x")
	if res.ExecutionCount != 2 || plain(res) != "1" {
		t.Errorf("after the checks: execution %d, x = %q; want execution 2, x = 1", res.ExecutionCount, plain(res))
	}
}

// TestIsCompleteUnsupported: a driver that cannot run commands says so,
// as errors.ErrUnsupported, rather than guessing.
func TestIsCompleteUnsupported(t *testing.T) {
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	ctx := context.Background()
	m, err := session.NewManager(ctx, cfg, session.WithDriver(sessiontest.NewDriver()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	if c, err := m.IsComplete(ctx, "k", "x = 1"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("IsComplete on the in-memory driver = %q, %v; want ErrUnsupported", c, err)
	}
}
