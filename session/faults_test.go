package session_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// containerOf returns the container id of the session of key.
func containerOf(t *testing.T, m *session.Manager, key string) string {
	t.Helper()
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if in.Key == key {
			return in.ContainerID
		}
	}
	t.Fatalf("no session %q in %+v", key, list)
	return ""
}

// TestContainerLostFromOutside removes or kills a session's container behind
// the manager's back: the next execution says the session was lost (and
// why), the one after starts a fresh session.
func TestContainerLostFromOutside(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		do     func(ctx context.Context, id string) error
		reason string
	}{
		{"removed", func(ctx context.Context, id string) error { return dockertest.Engine(t).RemoveContainer(ctx, id) }, "removed"},
		{"killed", func(ctx context.Context, id string) error { return dockertest.Engine(t).KillContainer(ctx, id, "KILL") }, "killed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, nil)
			mustExec(t, m, "k", "x = 1")
			ctx := context.Background()
			if err := c.do(ctx, containerOf(t, m, "k")); err != nil {
				t.Fatal(err)
			}
			_, err := m.Exec(ctx, "k", "x")
			if !errors.Is(err, session.ErrSessionLost) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("exec after the container was %s: %v, want ErrSessionLost naming it", c.name, err)
			}
			var se *session.Error
			if !errors.As(err, &se) || se.Key != "k" {
				t.Fatalf("error does not carry the key: %#v", err)
			}
			res := mustExec(t, m, "k", "'x' in globals()")
			if plain(res) != "False" || res.ExecutionCount != 1 {
				t.Fatalf("fresh session expected: %+v", res)
			}
		})
	}
}

// TestLostSeenByANewManager: a container removed while no manager ran is
// reported once to the next manager that uses the key.
func TestLostSeenByANewManager(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	m1 := managerFor(t, cfg, ns)
	mustExec(t, m1, "k", "x = 1")
	id := containerOf(t, m1, "k")
	m1.Close(context.Background())
	if err := dockertest.Engine(t).RemoveContainer(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	m2 := managerFor(t, cfg, ns)
	if _, err := m2.Exec(context.Background(), "k", "x"); !errors.Is(err, session.ErrSessionLost) {
		t.Fatalf("got %v, want ErrSessionLost", err)
	}
	mustExec(t, m2, "k", "x = 2")
}

func TestOutOfMemoryIsReported(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.MemoryMB = 256 })
	mustExec(t, m, "k", "open('/session/keep.txt', 'w').write('kept')")
	res := mustExec(t, m, "k", "b = bytearray(2 * 256 << 20)")
	if res.Error == nil || res.Error.Name != "OutOfMemory" || !res.KernelRestarted || !res.StateLost {
		t.Fatalf("want OutOfMemory with a restart, got %+v", res)
	}
	res = mustExec(t, m, "k", "print(open('/session/keep.txt').read())")
	if res.Stdout != "kept\n" {
		t.Fatalf("session files lost after the OOM kill: %+v", res)
	}
}

func TestForkBombContained(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.PidsLimit = 64 })
	res := mustExec(t, m, "k", `
import os, time
n = 0
try:
    for i in range(10000):
        pid = os.fork()
        if pid == 0:
            time.sleep(2)
            os._exit(0)
        n += 1
    print("not contained", n)
except OSError as e:
    print("contained", n, e.errno)
for _ in range(n):
    os.wait()
`)
	if !strings.HasPrefix(res.Stdout, "contained") || res.Error != nil {
		t.Fatalf("fork bomb: %q %+v", res.Stdout, res.Error)
	}
	if out, err := exec.Command("true").CombinedOutput(); err != nil {
		t.Fatalf("host cannot fork after the bomb: %v %s", err, out)
	}
	if res := mustExec(t, m, "k", "n"); plain(res) == "" {
		t.Fatalf("session unusable after the bomb: %+v", res)
	}
}

func TestFullSessionDiskIsAnError(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.TmpfsSizeMB = 16 })
	res := mustExec(t, m, "k", `
with open("/session/big", "wb") as f:
    for _ in range(64):
        f.write(b"x" * (1 << 20))`)
	if res.Error == nil || res.Error.Name != "OSError" || !strings.Contains(res.Error.Value, "No space left") {
		t.Fatalf("want ENOSPC as an OSError, got %+v", res.Error)
	}
	res = mustExec(t, m, "k", "import os; os.remove('/session/big'); print('ok')")
	if res.Stdout != "ok\n" {
		t.Fatalf("after ENOSPC: %+v", res)
	}
}

func TestIdleSessionsAreSwept(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.IdleTimeout = time.Second }, session.WithSweepInterval(200*time.Millisecond))
	mustExec(t, m, "idle", "x = 1")
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := m.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle session not swept: %+v", list)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// An evicted session is not an accident: the next call starts afresh
	// without an error.
	res := mustExec(t, m, "idle", "'x' in globals()")
	if plain(res) != "False" {
		t.Fatalf("after eviction: %+v", res)
	}
}

func TestHostileKeys(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.SessionStorage = config.StorageBind })
	keys := []string{"../../etc", "/", "a key with spaces", "ключ 🔑", strings.Repeat("k", 1000), "nul\x00byte", "'; DROP TABLE sessions; --"}
	for _, k := range keys {
		res := mustExec(t, m, k, "print('ok')")
		if res.Stdout != "ok\n" || res.Session != k {
			t.Fatalf("key %q: %+v", k, res)
		}
	}
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(keys) {
		t.Fatalf("want %d sessions, got %d", len(keys), len(list))
	}
	for _, in := range list {
		if in.ID != session.ID(in.Key) {
			t.Fatalf("session %q has id %q, want %q", in.Key, in.ID, session.ID(in.Key))
		}
	}
	if _, err := m.Exec(context.Background(), "", "1"); !errors.Is(err, session.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := m.Exec(context.Background(), strings.Repeat("k", session.MaxKeyBytes+1), "1"); !errors.Is(err, session.ErrInvalidKey) {
		t.Fatalf("long key: %v", err)
	}
}
