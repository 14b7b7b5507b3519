package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/session"
)

// freezeRace is what the engine answers when runc's cgroup v1 freezer
// gives up (processes forking or exec'ing while it freezes; a loaded
// machine): the container is left running, and a new attempt usually
// succeeds.
var freezeRace = errors.New("Error response from daemon: Cannot pause container 390998d4ad1a: OCI runtime pause failed: unable to freeze: unknown")

// TestPauseRetriesAFreezeRace: a pause the driver could not make (the
// Docker driver retries a freezer that gave up a few times; see
// internal/docker's TestFreezeRetries) is reported, and leaves the session
// running and usable.
func TestPauseRetriesAFreezeRace(t *testing.T) {
	cases := []struct {
		name     string
		failures int
		err      error
		paused   bool
	}{
		{"freezer keeps giving up", 100, freezeRace, false},
		{"another error", 1, errors.New("Error response from daemon: something else"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, d := fakeManager(t, nil)
			ctx := context.Background()
			if _, err := m.Exec(ctx, "k", "x = 1"); err != nil {
				t.Fatal(err)
			}
			d.FailNextPauses(c.failures, c.err)
			err := m.Pause(ctx, "k")
			in, ierr := m.Info(ctx, "k", session.WithoutMemoryUse())
			if ierr != nil {
				t.Fatal(ierr)
			}
			if c.paused {
				if err != nil || in.State != session.StatePaused {
					t.Fatalf("Pause: %v, state %q; want it paused", err, in.State)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err.Error()) {
				t.Fatalf("Pause: %v; want the engine's error %q", err, c.err)
			}
			if in.State == session.StatePaused {
				t.Fatalf("state %q after a failed pause", in.State)
			}
			if _, err := m.Exec(ctx, "k", "x"); err != nil {
				t.Fatalf("exec after a failed pause: %v", err)
			}
		})
	}
}
