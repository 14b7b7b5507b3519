package session_test

import (
	"archive/tar"
	"bytes"
	"context"
	"strconv"
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

// TestEvictionByAnotherProcessIsReported: a session another process's
// sweep evicted is, for the process that still holds it, what an eviction
// by its own sweep is: the next call runs in a fresh session and says the
// state is gone and why, and the call after it does not.
func TestEvictionByAnotherProcessIsReported(t *testing.T) {
	t.Parallel()
	m, sweep := sweepers(t, time.Second, true)
	mustExec(t, m, "idle", "x = 1")
	sweep()
	waitGone(t, m, "idle")
	res, err := m.Exec(context.Background(), "idle", "'x' in globals()")
	if err != nil {
		t.Fatalf("first call after another process evicted the session: %v; want a fresh session that says the state is lost", err)
	}
	if plain(res) != "False" || !res.StateLost || !strings.Contains(res.RestartReason, "evicted after") {
		t.Fatalf("first call after the eviction: %q, StateLost %v, reason %q, want both to say so", plain(res), res.StateLost, res.RestartReason)
	}
	if res := mustExec(t, m, "idle", "y = 1"); res.StateLost {
		t.Fatalf("the second call says the state was lost again: %+v", res)
	}
}

// TestSessionEndedByAnotherProcess: a session another process stopped, or
// stopped and started anew, is opened anew by the process that still
// holds it, at its next call: never a call sent to the removed container
// and failed. Before, that call failed with "session lost: container was
// removed", and recorded the loss over the other process's reason.
func TestSessionEndedByAnotherProcess(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	for _, restarted := range []bool{false, true} {
		t.Run("started again by the other="+strconv.FormatBool(restarted), func(t *testing.T) {
			t.Parallel()
			ns := namespace()
			m1, m2 := managerFor(t, cfg, ns), managerFor(t, cfg, ns)
			mustExec(t, m1, "k", "x = 1")
			if err := m2.Stop(context.Background(), "k"); err != nil {
				t.Fatal(err)
			}
			if restarted {
				mustExec(t, m2, "k", "y = 2")
			}
			res, err := m1.Exec(context.Background(), "k", "'x' in globals()")
			if err != nil {
				t.Fatalf("first call after another process stopped the session: %v", err)
			}
			if plain(res) != "False" {
				t.Fatalf("first call after another process stopped the session: x is still there (%q)", plain(res))
			}
			want := "ended in another process (stopped)"
			if restarted {
				want = "another process started"
			}
			if !res.StateLost || !strings.Contains(res.RestartReason, want) {
				t.Fatalf("first call after another process stopped the session: StateLost %v, reason %q; want both to say the state is gone (%q)", res.StateLost, res.RestartReason, want)
			}
			if restarted {
				if res := mustExec(t, m1, "k", "y"); plain(res) != "2" || res.StateLost {
					t.Fatalf("second call: %q, StateLost %v; want the other process's y = 2, and no second notice", plain(res), res.StateLost)
				}
			}
			if got := containerOf(t, m1, "k"); got != containerOf(t, m2, "k") {
				t.Fatalf("the two processes use containers %s and %s", got, containerOf(t, m2, "k"))
			}
		})
	}
}

// TestCommandAndFileAfterAnotherProcessStopped: a shell command or a file
// operation on a session another process stopped runs in a fresh session,
// as an execution does, and never in (or against) the removed container.
func TestCommandAndFileAfterAnotherProcessStopped(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	for _, op := range []string{"command", "file"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			ns := namespace()
			m1, m2 := managerFor(t, cfg, ns), managerFor(t, cfg, ns)
			mustRun(t, m1, "k", session.Command{Line: "echo old > /session/artifacts/mark"})
			old := containerOf(t, m1, "k")
			if err := m2.Stop(context.Background(), "k"); err != nil {
				t.Fatal(err)
			}
			switch op {
			case "command":
				res := mustRun(t, m1, "k", session.Command{Line: "cat /session/artifacts/mark 2>/dev/null || echo fresh"})
				if strings.TrimSpace(res.Stdout) != "fresh" {
					t.Fatalf("a command after another process stopped the session: %q, want a fresh session", res.Stdout)
				}
			case "file":
				if _, err := m1.WriteFile(context.Background(), "k", "/session/artifacts/new", strings.NewReader("x"), 0o644); err != nil {
					t.Fatalf("a file write after another process stopped the session: %v", err)
				}
			}
			if got := containerOf(t, m1, "k"); got == old {
				t.Fatalf("the stopped container %s still serves the session", old)
			}
		})
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
