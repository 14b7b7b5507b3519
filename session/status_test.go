package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
)

// TestStatusFollowsTheContainer: Status, which answers from the session's
// open stream without the engine, says what Info says as the session is
// paused, resumed, and its container killed behind the Manager's back.
func TestStatusFollowsTheContainer(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	m := managerFor(t, cfg, namespace())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mustExec(t, m, "k", "x = 1")
	same := func(want string) {
		t.Helper()
		st, err := m.Status(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		in, err := m.Info(ctx, "k", session.WithoutMemoryUse())
		if err != nil {
			t.Fatal(err)
		}
		if st.State != want || st.State != in.State || st.PausedBy != in.PausedBy || st.ContainerID != in.ContainerID {
			t.Fatalf("Status %+v, Info state %s paused by %q container %s: want %s", st, in.State, in.PausedBy, in.ContainerID, want)
		}
	}
	same(session.StateRunning)
	if err := m.Pause(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	same(session.StatePaused)
	if err := m.Resume(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	same(session.StateRunning)
	in, err := m.Info(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	dockerCLI(t, "kill", in.ContainerID)
	// The stream's end reaches the Manager a moment after the kill.
	waitFor(t, "the kill seen by Status", func() bool {
		st, err := m.Status(ctx, "k")
		return err == nil && st.State == session.StateLost
	})
	same(session.StateLost)
}
