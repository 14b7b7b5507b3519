package session_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// TestReplayOutlivesTheContainer: an execution id, once recorded, replays
// from the manager's history even when the container that ran it is gone
// (removed from outside) and the key has a new session, whose kernel never
// saw the id: the recorded result comes back, flagged Replayed, and the code
// does not run again, in this process or in a new one. Within one container
// the kernel's own ring replays too, so only a lost container shows that
// the Manager does.
func TestReplayOutlivesTheContainer(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	m := managerFor(t, cfg, ns)
	const code = "import uuid\ntoken = uuid.uuid4().hex\nopen('/session/ran', 'a').write(token + '\\n')\nprint(token)"
	first := mustExec(t, m, "k", code, session.ExecID("call-1"))
	if first.Replayed || len(first.Stdout) != 33 {
		t.Fatalf("first run: %+v", first)
	}
	old := containerOf(t, m, "k")
	ctx := context.Background()
	if err := dockertest.Engine(t).RemoveContainer(ctx, old); err != nil {
		t.Fatal(err)
	}

	replayed := func(t *testing.T, m *session.Manager, when string) {
		t.Helper()
		res := mustExec(t, m, "k", code, session.ExecID("call-1"))
		if !res.Replayed || res.Stdout != first.Stdout || res.ExecutionCount != first.ExecutionCount {
			t.Fatalf("%s: the same id gave Replayed %v, stdout %q (count %d); want the recorded %q (count %d)",
				when, res.Replayed, res.Stdout, res.ExecutionCount, first.Stdout, first.ExecutionCount)
		}
	}
	replayed(t, m, "container gone, not yet noticed")

	if _, err := m.Exec(ctx, "k", "1"); !errors.Is(err, session.ErrSessionLost) {
		t.Fatalf("first call after the removal: %v, want ErrSessionLost", err)
	}
	if res := mustExec(t, m, "k", "'token' in globals()"); plain(res) != "False" {
		t.Fatalf("the new session has the old state: %+v", res)
	}
	if id := containerOf(t, m, "k"); id == old {
		t.Fatalf("no new container")
	}
	replayed(t, m, "in the new session")
	replayed(t, managerFor(t, cfg, ns), "in the new session, from a new process")

	// Not run again: the new session has neither the variable nor the file.
	res := mustExec(t, m, "k", "import os\nprint('token' in globals(), os.path.exists('/session/ran'))")
	if res.Stdout != "False False\n" {
		t.Fatalf("the replayed code ran in the new session: %q", res.Stdout)
	}
}
