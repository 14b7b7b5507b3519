package sessiontest_test

import (
	"context"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestContainerIDNamesAnIncarnation: Info.ContainerID stays the same for
// the life of a session (taken from the pool, paused, resumed, seen by
// another Manager) and changes when the session is created again under
// the same key (after Stop, after its container died). agentbox serve's
// execd tokens are bound to it, so a token opens only the incarnation it
// was issued for.
func TestContainerIDNamesAnIncarnation(t *testing.T) {
	d := sessiontest.NewDriver()
	cfg := testConfig(t, func(c *config.Config) { c.PoolSize = 1 })
	ctx := context.Background()
	m1, err := session.NewManager(ctx, cfg, session.WithDriver(d))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return m1.PoolReady() == 1 })
	idOf := func(m *session.Manager, what string) string {
		t.Helper()
		info, err := m.Info(ctx, "k", session.WithoutMemoryUse())
		if err != nil || info.ContainerID == "" {
			t.Fatalf("%s: Info %+v, %v", what, info, err)
		}
		return info.ContainerID
	}
	started, err := m1.Start(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	first := idOf(m1, "started")
	if started.ContainerID != first {
		t.Errorf("Start says container %q, Info %q", started.ContainerID, first)
	}
	mustExec(t, m1, "k", "x = 1")
	if err := m1.Pause(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got := idOf(m1, "paused"); got != first {
		t.Errorf("paused: container %q, want %q", got, first)
	}
	if err := m1.Resume(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got := idOf(m1, "resumed"); got != first {
		t.Errorf("resumed: container %q, want %q", got, first)
	}
	if err := m1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m2 := startManager(t, d, cfg)
	if got := idOf(m2, "another Manager"); got != first {
		t.Errorf("another Manager: container %q, want %q", got, first)
	}

	if err := m2.Stop(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Start(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	second := idOf(m2, "started again")
	if second == first {
		t.Errorf("started again after Stop: the same container id %q", second)
	}
	d.Kill(second)
	_, _ = m2.Exec(ctx, "k", "1") // reports the loss
	mustExec(t, m2, "k", "1")     // starts afresh
	if third := idOf(m2, "after its container died"); third == second || third == first {
		t.Errorf("after its container died: container %q again", third)
	}
}
