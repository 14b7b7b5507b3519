package sessiontest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestNamespaceFromConfig: AGENTBOX_NAMESPACE (Config.Namespace) chooses a
// Manager's namespace, so a backend built from the configuration and the
// agentbox command see the same sessions; WithNamespace wins over it; an
// empty one is the default; a bad one stops NewManager.
func TestNamespaceFromConfig(t *testing.T) {
	d := sessiontest.NewDriver()
	cfg := testConfig(t, func(c *config.Config) { c.Namespace = "team-a" })

	backend := startManager(t, d, cfg)
	if got := backend.Namespace(); got != "team-a" {
		t.Fatalf("Namespace() = %q, want team-a from the config", got)
	}
	mustExec(t, backend, "thread-1", "x = 1")
	info, err := backend.Start(context.Background(), "thread-1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Inspect(context.Background(), info.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "team-a_" + session.ID("thread-1"); c.Name != want || c.Labels[session.LabelNamespace] != "team-a" {
		t.Errorf("container %q labelled %q, want %q in namespace team-a", c.Name, c.Labels[session.LabelNamespace], want)
	}

	// What agentbox ls does: a second manager from the same configuration.
	cli := startManager(t, d, cfg)
	keys := func(m *session.Manager) []string {
		list, err := m.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, in := range list {
			out = append(out, in.Key)
		}
		return out
	}
	if got := keys(cli); !slices.Equal(got, []string{"thread-1"}) {
		t.Errorf("a manager of the same config lists %v, want [thread-1]", got)
	}

	other := startManager(t, d, cfg, session.WithNamespace("team-b"))
	if got := other.Namespace(); got != "team-b" {
		t.Errorf("WithNamespace: Namespace() = %q, want team-b", got)
	}
	if got := keys(other); len(got) != 0 {
		t.Errorf("another namespace lists %v, want none", got)
	}

	cfg.Namespace = ""
	if got := startManager(t, d, cfg).Namespace(); got != session.DefaultNamespace {
		t.Errorf("empty Config.Namespace: Namespace() = %q, want %q", got, session.DefaultNamespace)
	}

	cfg.Namespace = "Team A"
	if m, err := session.NewManager(context.Background(), cfg, session.WithDriver(d)); err == nil {
		m.Close(context.Background())
		t.Error("NewManager accepted AGENTBOX_NAMESPACE=\"Team A\"")
	}
}
