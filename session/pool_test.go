package session_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// warm counts the warm containers of namespace ns.
func warm(t *testing.T, ns string) int {
	t.Helper()
	list, err := dockertest.Engine(t).ListContainers(context.Background(), session.LabelNamespace+"="+ns)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range list {
		if filepath.Base(c.Name) != "" && len(c.Name) > len(ns)+6 && c.Name[:len(ns)+6] == ns+"_pool_" {
			n++
		}
	}
	return n
}

func waitWarm(t *testing.T, ns string, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for warm(t, ns) != want {
		if time.Now().After(deadline) {
			t.Fatalf("pool has %d warm containers, want %d", warm(t, ns), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPoolBoundedAndRefilled: the pool fills to its size and no further,
// hands containers to new keys and refills.
func TestPoolBoundedAndRefilled(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.PoolSize = 2 })
	ns := namespace()
	m := managerFor(t, cfg, ns)
	waitWarm(t, ns, 2)
	for i, key := range []string{"a", "b", "c"} {
		res := mustExec(t, m, key, "print('ok')")
		if res.Stdout != "ok\n" {
			t.Fatalf("key %s: %+v", key, res)
		}
		if n := warm(t, ns); n > 2 {
			t.Fatalf("after %d keys the pool holds %d containers, more than its size", i+1, n)
		}
	}
	waitWarm(t, ns, 2)
	time.Sleep(time.Second) // give an over-eager filler the chance to overshoot
	if n := warm(t, ns); n != 2 {
		t.Fatalf("pool holds %d, want 2", n)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := warm(t, ns); n != 0 {
		t.Fatalf("close left %d warm containers", n)
	}
}

// TestPooledBindSession: a warm container handed to a key in BIND mode
// writes to the key's folder, finds the files an earlier session of the key
// left there, and is reattached by a new manager like any other.
func TestPooledBindSession(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) {
		c.SessionStorage = config.StorageBind
		c.PoolSize = 1
	})
	ns := namespace()
	dir := filepath.Join(cfg.SessionsRoot, session.ID("p"))
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "earlier.txt"), []byte("from before"), 0o644); err != nil {
		t.Fatal(err)
	}
	m1 := managerFor(t, cfg, ns)
	waitWarm(t, ns, 1)
	res := mustExec(t, m1, "p", "print(open('/session/earlier.txt').read())\nopen('/session/new.txt', 'w').write('new')\nv = 7")
	if res.Stdout != "from before\n" || res.Error != nil {
		t.Fatalf("pooled session does not see the key's folder: %+v", res)
	}
	if data, err := os.ReadFile(filepath.Join(dir, session.WorkspaceDir, "new.txt")); err != nil || string(data) != "new" {
		t.Fatalf("pooled session does not write the key's folder: %q %v", data, err)
	}
	checkBindFiles(t, cfg.SessionsRoot, "p", 1, "v")
	m1.Close(context.Background())

	m2 := managerFor(t, cfg, ns)
	res = mustExec(t, m2, "p", "v * 6")
	if plain(res) != "42" {
		t.Fatalf("reattached pooled session lost its state: %+v", res)
	}
}
