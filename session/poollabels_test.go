package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/session"
)

// TestPooledSessionIsASession: with POOL_SIZE=1 a new key gets the warm
// container, renamed. Its labels say nothing false (no pool role; Docker
// cannot relabel it), and whoever reads the engine takes it for the key's
// session by its name: another manager (what agentbox ls and
// session-viewer run) lists it with its key from the database and StopAll
// counts it; an idle sweep evicts it as a session.
func TestPooledSessionIsASession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cli := dockertest.Engine(t)
	ns := namespace()
	cfg := testConfig(t, func(c *config.Config) { c.PoolSize = 1 })
	m := managerFor(t, cfg, ns)
	warmID := adoptWarm(t, m, ns, "thread-1")
	c, err := cli.InspectContainer(ctx, warmID)
	if err != nil {
		t.Fatal(err)
	}
	if want := ns + "_" + session.ID("thread-1"); strings.TrimPrefix(c.Name, "/") != want {
		t.Errorf("the session's container is named %q, want %q", c.Name, want)
	}
	if _, ok := c.Labels[session.LabelRole]; ok || c.Labels[session.LabelNamespace] != ns {
		t.Errorf("the session's labels %v: want no role (it was made warm), namespace %s", c.Labels, ns)
	}

	// Another process of the same configuration, without a pool, as
	// agentbox ls is.
	lsCfg := cfg
	lsCfg.PoolSize = 0
	ls := managerFor(t, lsCfg, ns)
	sessions, err := ls.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 1 || sessions[0].ContainerID != warmID || sessions[0].Key != "thread-1" ||
		sessions[0].ID != session.ID("thread-1") || sessions[0].ExecutionCount != 1 || sessions[0].State != "running" {
		t.Errorf("another manager lists %+v, want thread-1's session in the warm container, one execution", sessions)
	}
	if n, err := ls.StopAll(ctx); err != nil || n != 1 {
		t.Errorf("StopAll: %d sessions, %v; want 1 (thread-1, made from a warm container)", n, err)
	}
}

// TestPooledSessionEvictedWhenIdle: a session made from a warm container
// is swept as a session once idle for its timeout, and its record says so.
func TestPooledSessionEvictedWhenIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cli := dockertest.Engine(t)
	ns := namespace()
	cfg := testConfig(t, func(c *config.Config) {
		c.PoolSize = 1
		c.IdleTimeout = 3 * time.Second
	})
	m := managerFor(t, cfg, ns, session.WithSweepInterval(300*time.Millisecond))
	warmID := adoptWarm(t, m, ns, "thread-1")
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := cli.InspectContainer(ctx, warmID); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session made from a warm container was not evicted")
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, err := store.Open(ctx, cfg.ArtifactsDB)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	row, err := st.Session(ctx, ns, session.ID("thread-1"))
	if err != nil || row.Key != "thread-1" || !strings.HasPrefix(row.StopReason, "idle") {
		t.Errorf("after the sweep: %+v, %v; want thread-1 stopped as idle", row, err)
	}
}

// adoptWarm waits for m's warm container and runs code on key, which must
// take it; it returns the container's id.
func adoptWarm(t *testing.T, m *session.Manager, ns, key string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for m.PoolReady() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no warm container ready after a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	list, err := dockertest.Engine(t).ListContainers(context.Background(), session.LabelNamespace+"="+ns)
	if err != nil || len(list) != 1 {
		t.Fatalf("warm containers: %v, %v", list, err)
	}
	if role, ok := list[0].Labels[session.LabelRole]; ok {
		t.Errorf("a warm container is labelled %s=%s: wrong once it is a session", session.LabelRole, role)
	}
	mustExec(t, m, key, "x = 41")
	info, err := m.Start(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if info.ContainerID != list[0].ID {
		t.Fatalf("%s got container %.12s, want the warm %.12s", key, info.ContainerID, list[0].ID)
	}
	return info.ContainerID
}
