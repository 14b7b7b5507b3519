package session_test

import (
	"archive/tar"
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// waitGone waits until the session of key has no container.
func waitGone(t *testing.T, m *session.Manager, key string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := m.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, in := range list {
			found = found || in.Key == key
		}
		if !found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %q not evicted: %+v", key, list)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestEvictionIsReported: the first call after an idle eviction says that
// the state is gone and why; it is never a silent fresh start. Before, it
// returned a NameError with StateLost false.
func TestEvictionIsReported(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.IdleTimeout = time.Second }, session.WithSweepInterval(200*time.Millisecond))
	mustExec(t, m, "idle", "x = 1")
	waitGone(t, m, "idle")
	res := mustExec(t, m, "idle", "'x' in globals()")
	if plain(res) != "False" || !res.StateLost || !strings.Contains(res.RestartReason, "evicted after") {
		t.Fatalf("first call after the eviction: StateLost %v, reason %q, want both to say so", res.StateLost, res.RestartReason)
	}
	if res := mustExec(t, m, "idle", "y = 1"); res.StateLost {
		t.Fatalf("the second call says the state was lost again: %+v", res)
	}
}

// variantImage tags a copy of the sandbox image with another image id (one
// more label), as a manager configured with another SANDBOX_IMAGE has.
func variantImage(t *testing.T) string {
	t.Helper()
	cli := dockertest.Engine(t)
	base := dockertest.Image(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := []byte("FROM " + base + "\nLABEL io.agentbox.test-variant=1\n")
	tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))})
	tw.Write(df)
	tw.Close()
	ref := strings.Split(base, ":")[0] + ":test-variant"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.BuildImage(ctx, &buf, docker.BuildSpec{Tags: []string{ref}}, func(string) {}); err != nil {
		t.Fatalf("build a variant image: %v", err)
	}
	return ref
}

// TestSweepsRespectOtherSessions: a manager with a short idle timeout, and
// one started with another SANDBOX_IMAGE, sweep the namespace while another
// manager's session with a long timeout sits idle: it stays, with its
// state. Before, the short timeout applied to every session, and a manager
// of another image removed every live session older than a minute.
func TestSweepsRespectOtherSessions(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = time.Hour })
	ns := namespace()
	m1 := managerFor(t, cfg, ns)
	mustExec(t, m1, "long", "x = 41")

	short := cfg
	short.IdleTimeout = time.Second
	managerFor(t, short, ns, session.WithSweepInterval(200*time.Millisecond), session.WithOrphanGrace(200*time.Millisecond))
	other := cfg
	other.SandboxImage = variantImage(t)
	managerFor(t, other, ns, session.WithSweepInterval(200*time.Millisecond), session.WithOrphanGrace(200*time.Millisecond))

	time.Sleep(4 * time.Second) // twenty sweeps of each
	res := mustExec(t, m1, "long", "x + 1")
	if plain(res) != "42" || res.StateLost {
		t.Fatalf("the long-timeout session was swept by another manager: %+v", res)
	}
}
