package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// TestCloseLeavesNoWarmContainer closes managers while their warm-pool
// filler is creating containers, at several points of its work: once Close
// returns, no container of the manager is left, none appears after, and
// none is left in the created state. Before, Close cancelled a create
// mid-call; the engine finished it after the filler's removal by name had
// found nothing (TestEnvPerSession leaked 7 so).
func TestCloseLeavesNoWarmContainer(t *testing.T) {
	t.Parallel()
	cli := dockertest.Engine(t)
	cfg := testConfig(t, func(c *config.Config) { c.PoolSize = 3 })
	var spaces []string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, ns := range spaces {
			_ = dockertest.Sweep(ctx, cli, session.LabelNamespace+"="+ns)
		}
	})
	left := func(ns string) int {
		list, err := cli.ListContainers(context.Background(), session.LabelNamespace+"="+ns)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	for _, after := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond} {
		ns := namespace()
		spaces = append(spaces, ns)
		m, err := session.NewManager(context.Background(), cfg, session.WithNamespace(ns),
			session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(after) // where in the filler's work Close comes: the point of the test
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = m.Close(ctx)
		cancel()
		if err != nil {
			t.Fatalf("close %v after start: %v", after, err)
		}
		if n := left(ns); n != 0 {
			t.Errorf("Close %v after start left %d warm containers", after, n)
		}
	}
	// A create the engine finished after Close would show by now: the
	// loop above took seconds.
	for _, ns := range spaces {
		if n := left(ns); n != 0 {
			t.Errorf("namespace %s: %d containers appeared after Close returned", ns, n)
		}
	}
}
