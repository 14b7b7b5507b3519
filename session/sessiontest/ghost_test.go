package sessiontest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// ghostDriver shows, at the first look for a container name the engine does
// not have, a stopped container under that name that no session ever
// recorded: one whose start failed and that its creator (another process)
// is removing, as Docker shows it.
type ghostDriver struct {
	*sessiontest.Driver
	ghost session.Container

	mu      sync.Mutex
	shown   bool
	removed bool
}

const ghostID = "6057000000000000000000000000000000000000000000000000000000000000"

func (g *ghostDriver) Inspect(ctx context.Context, idOrName string) (session.Container, error) {
	c, err := g.Driver.Inspect(ctx, idOrName)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case idOrName == ghostID && !g.removed:
		return g.ghost, nil
	case errors.Is(err, session.ErrContainerNotFound) && !g.shown:
		g.shown = true
		ghost := g.ghost
		ghost.Name = idOrName
		return ghost, nil
	}
	return c, err
}

func (g *ghostDriver) Remove(ctx context.Context, id string) error {
	if id == ghostID {
		g.mu.Lock()
		g.removed = true
		g.mu.Unlock()
		return nil
	}
	return g.Driver.Remove(ctx, id)
}

// TestContainerNeverServedIsNoLoss: a stopped container under a new key's
// name that no session recorded is no session lost: no call ever ran in it.
// The key starts afresh, without an error and without a notice. CI's
// TestRacingEightProcessesShareOneSession failed so on an engine that
// refuses oom_score_adj -1000 (this VM's): each racer's new Manager fails
// its first start; seven racers saw the winner's failed container "dead,
// exit code 128" while the winner removed it to start one without, and
// each reported the session lost.
func TestContainerNeverServedIsNoLoss(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ghost session.Container
	}{
		{"being removed after a failed start", session.Container{Status: "dead", ExitCode: 128}},
		{"its init died before it was recorded", session.Container{Status: "exited", ExitCode: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := sessiontest.NewDriver()
			tc.ghost.ID, tc.ghost.Image, tc.ghost.Created = ghostID, "sha256:ghost", time.Now()
			g := &ghostDriver{Driver: d, ghost: tc.ghost}
			m, err := session.NewManager(context.Background(), testConfig(t, nil), session.WithDriver(g))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close(context.Background()) })
			res := mustExec(t, m, "k", "print(1)")
			if !g.shown || !g.removed {
				t.Fatalf("the ghost was shown %v, removed %v: the test did not test", g.shown, g.removed)
			}
			if len(res.Warnings) > 0 {
				t.Errorf("a fresh key's first result warns: %q", res.Warnings)
			}
		})
	}
	// The same look at a container the key's row names is a loss, told
	// with its cause.
	t.Run("recorded, then killed", func(t *testing.T) {
		d := sessiontest.NewDriver()
		cfg := testConfig(t, nil)
		m := startManager(t, d, cfg)
		mustExec(t, m, "k", "x = 1")
		info, err := m.Info(context.Background(), "k", session.WithoutMemoryUse())
		if err != nil {
			t.Fatal(err)
		}
		d.Kill(info.ContainerID)
		// Another Manager, which opens the key by its name.
		_, err = startManager(t, d, cfg).Exec(context.Background(), "k", "x")
		if !errors.Is(err, session.ErrSessionLost) || !strings.Contains(err.Error(), "killed (exit code 137)") {
			t.Fatalf("Exec after the container was killed: %v, want ErrSessionLost saying it was killed", err)
		}
	})
}
