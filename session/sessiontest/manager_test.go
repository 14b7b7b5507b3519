package sessiontest_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// These tests drive session.Manager through the fake driver: pure logic, no
// engine.

func testConfig(t testing.TB, edit func(*config.Config)) config.Config {
	t.Helper()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	// The in-memory driver's containers never end in the engine, so a BIND
	// session's loop-mounted disk would outlive the test; these tests need
	// no root.
	cfg.SessionDiskMB = 0
	if edit != nil {
		edit(&cfg)
	}
	return cfg
}

func startManager(t testing.TB, d *sessiontest.Driver, cfg config.Config, opts ...session.Option) *session.Manager {
	t.Helper()
	m, err := session.NewManager(context.Background(), cfg, append([]session.Option{session.WithDriver(d)}, opts...)...)
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m
}

func newManager(t *testing.T, d *sessiontest.Driver) *session.Manager {
	t.Helper()
	return startManager(t, d, testConfig(t, nil))
}

func mustExec(t *testing.T, m *session.Manager, key, code string, opts ...session.ExecOption) *session.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := m.Exec(ctx, key, code, opts...)
	if err != nil {
		t.Fatalf("exec %q on %q: %v", code, key, err)
	}
	return res
}

func plain(res *session.Result) string {
	for _, o := range res.Outputs {
		if o.Kind == "execute_result" {
			return o.Data["text/plain"]
		}
	}
	return ""
}

func TestManagerKeepsStatePerKey(t *testing.T) {
	m := newManager(t, sessiontest.NewDriver())
	mustExec(t, m, "a", "x = 41")
	if res := mustExec(t, m, "a", "x + 1"); plain(res) != "42" || res.ExecutionCount != 2 || res.Session != "a" {
		t.Fatalf("same key: %+v", res)
	}
	if res := mustExec(t, m, "b", "x"); res.Error == nil || res.Error.Name != "NameError" {
		t.Fatalf("other key sees x: %+v", res)
	}
	st, err := m.Inspect(context.Background(), "a")
	if err != nil || len(st.Variables) != 1 || st.Variables[0].Repr != "41" {
		t.Fatalf("inspect: %+v, %v", st, err)
	}
	list, err := m.List(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	for _, in := range list {
		if in.MemoryBytes != sessiontest.MemoryBytes || in.State != "running" {
			t.Errorf("list entry %+v", in)
		}
	}
}

func TestConcurrentExecOnANewKeyCreatesOneContainer(t *testing.T) {
	d := sessiontest.NewDriver()
	m := newManager(t, d)
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Exec(context.Background(), "same", "sleep(0.01)"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := d.Created(); got != 1 {
		t.Fatalf("%d containers created, want 1", got)
	}
	list, err := m.List(context.Background())
	if err != nil || len(list) != 1 || list[0].ExecutionCount != n {
		t.Fatalf("want one session with %d executions: %+v, %v", n, list, err)
	}
}

// elapsed runs code on each key at once and returns how long they took.
func elapsed(t *testing.T, m *session.Manager, code string, keys ...string) time.Duration {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	for _, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Exec(context.Background(), key, code); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

func TestCallsOnOneKeyAreSerialized(t *testing.T) {
	m := newManager(t, sessiontest.NewDriver())
	mustExec(t, m, "a", "1")
	mustExec(t, m, "b", "1")
	// Serialized, two sleeps take at least their sum: a firm lower bound.
	// In parallel they take about one; the bound leaves most of a second
	// for a loaded machine's bookkeeping, so the check is about overlap,
	// not speed.
	if el := elapsed(t, m, "sleep(1)", "a", "a"); el < 2*time.Second {
		t.Errorf("two sleeps of 1s on one key took %s: they overlapped", el)
	}
	if el := elapsed(t, m, "sleep(1)", "a", "b"); el >= 1900*time.Millisecond {
		t.Errorf("two sleeps of 1s on two keys took %s: they did not overlap", el)
	}
}

func TestClosedManagerFailsEveryCall(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, sessiontest.NewDriver())
	mustExec(t, m, "k", "x = 1")
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	calls := map[string]error{}
	_, calls["Exec"] = m.Exec(ctx, "k", "x")
	_, calls["Fetch"] = m.Fetch(ctx, "k", "id")
	_, calls["Start"] = m.Start(ctx, "k")
	_, calls["Inspect"] = m.Inspect(ctx, "k")
	_, calls["List"] = m.List(ctx)
	calls["Stop"] = m.Stop(ctx, "k")
	_, calls["StopAll"] = m.StopAll(ctx)
	for name, err := range calls {
		if !errors.Is(err, session.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if err := m.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestContainerGoneBehindTheBack(t *testing.T) {
	for name, fault := range map[string]func(*sessiontest.Driver, string){
		"killed":  (*sessiontest.Driver).Kill,
		"removed": (*sessiontest.Driver).RemoveBehindBack,
	} {
		t.Run(name, func(t *testing.T) {
			d := sessiontest.NewDriver()
			m := newManager(t, d)
			mustExec(t, m, "k", "x = 1")
			info, err := m.Start(context.Background(), "k")
			if err != nil {
				t.Fatal(err)
			}
			fault(d, info.ContainerID)
			_, err = m.Exec(context.Background(), "k", "x")
			var serr *session.Error
			if !errors.Is(err, session.ErrSessionLost) || !errors.As(err, &serr) || serr.Key != "k" {
				t.Fatalf("exec after the container went: %v, want ErrSessionLost naming the key", err)
			}
			res := mustExec(t, m, "k", "x")
			if res.Error == nil || res.Error.Name != "NameError" || res.ExecutionCount != 1 {
				t.Fatalf("the next exec is not a fresh session: %+v", res)
			}
			if got := d.Created(); got != 2 {
				t.Fatalf("%d containers created, want 2", got)
			}
		})
	}
}

func TestContainerKilledDuringExec(t *testing.T) {
	d := sessiontest.NewDriver()
	m := newManager(t, d)
	info, err := m.Start(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { d.Kill(info.ContainerID) })
	if _, err := m.Exec(context.Background(), "k", "sleep(10)"); !errors.Is(err, session.ErrSessionLost) {
		t.Fatalf("exec while killed: %v, want ErrSessionLost", err)
	}
	mustExec(t, m, "k", "1")
}

func TestUnavailableEngine(t *testing.T) {
	d := sessiontest.NewDriver()
	cfg := testConfig(t, nil)
	d.SetUnavailable(true)
	if _, err := session.NewManager(context.Background(), cfg, session.WithDriver(d)); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("new manager: %v, want ErrUnavailable", err)
	}
	d.SetUnavailable(false)
	m := startManager(t, d, cfg)
	mustExec(t, m, "old", "x = 1")
	d.SetUnavailable(true)
	if _, err := m.Exec(context.Background(), "new", "1"); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("exec on a new key: %v, want ErrUnavailable", err)
	}
	// A session whose kernel is connected does not need the engine.
	if res := mustExec(t, m, "old", "x"); plain(res) != "1" {
		t.Fatalf("exec on a connected key: %+v", res)
	}
	d.SetUnavailable(false)
	mustExec(t, m, "new", "1")
}

func TestFailedCreate(t *testing.T) {
	d := sessiontest.NewDriver()
	m := newManager(t, d)
	boom := errors.New("boom")
	d.FailNextCreate(boom)
	if _, err := m.Exec(context.Background(), "k", "1"); !errors.Is(err, boom) {
		t.Fatalf("exec: %v, want boom", err)
	}
	if res := mustExec(t, m, "k", "1"); res.ExecutionCount != 1 {
		t.Fatalf("after a failed create: %+v", res)
	}
}

func TestImageChecks(t *testing.T) {
	d := sessiontest.NewDriver()
	d.AddImage("stale:1", map[string]string{"io.agentbox.protocol": "0"})
	for ref, want := range map[string]error{"missing:1": session.ErrImageMissing, "stale:1": session.ErrImageStale} {
		cfg := testConfig(t, func(c *config.Config) { c.SandboxImage = ref })
		if _, err := session.NewManager(context.Background(), cfg, session.WithDriver(d)); !errors.Is(err, want) {
			t.Errorf("image %s: %v, want %v", ref, err, want)
		}
	}
}

func TestExecIDReplay(t *testing.T) {
	d := sessiontest.NewDriver()
	m := newManager(t, d)
	first := mustExec(t, m, "k", "print('once')", session.ExecID("call-1"))
	again := mustExec(t, m, "k", "print('once')", session.ExecID("call-1"))
	if first.Replayed || !again.Replayed || again.Stdout != "once\n" || again.ExecutionCount != first.ExecutionCount {
		t.Fatalf("replay: first %+v, again %+v", first, again)
	}
	if _, err := m.Exec(context.Background(), "k", "print('twice')", session.ExecID("call-1")); !errors.Is(err, kernel.ErrIDConflict) {
		t.Fatalf("same id, other code: %v, want ErrIDConflict", err)
	}
	got, err := m.Fetch(context.Background(), "k", "call-1")
	if err != nil || got.Stdout != "once\n" {
		t.Fatalf("fetch: %+v, %v", got, err)
	}
	if _, err := m.Fetch(context.Background(), "k", "nope"); !errors.Is(err, session.ErrUnknownExecution) {
		t.Fatalf("fetch unknown: %v, want ErrUnknownExecution", err)
	}
	// The history keeps results when the kernel that made them is gone.
	info, _ := m.Start(context.Background(), "k")
	d.RemoveBehindBack(info.ContainerID)
	again = mustExec(t, m, "k", "print('once')", session.ExecID("call-1"))
	if !again.Replayed || again.Stdout != "once\n" {
		t.Fatalf("replay after the container went: %+v", again)
	}
	// The first call that reaches the lost kernel reports the loss (Fetch
	// does so too, rather than falling back to the history); after that the
	// history answers.
	if _, err := m.Fetch(context.Background(), "k", "call-1"); err != nil && !errors.Is(err, session.ErrSessionLost) {
		t.Fatalf("fetch after the container went: %v", err)
	}
	if got, err := m.Fetch(context.Background(), "k", "call-1"); err != nil || got.Stdout != "once\n" {
		t.Fatalf("fetch from the history: %+v, %v", got, err)
	}
	if n := d.Created(); n != 1 {
		t.Fatalf("a replay started a container: %d created", n)
	}
}

func TestTimeouts(t *testing.T) {
	m := newManager(t, sessiontest.NewDriver())
	mustExec(t, m, "k", "x = 1")
	res := mustExec(t, m, "k", "sleep(10)", session.Timeout(50*time.Millisecond))
	if !res.TimedOut || res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
		t.Fatalf("timeout: %+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := m.Exec(ctx, "k", "sleep(10)")
	if err != nil || !res.TimedOut || res.Error == nil {
		t.Fatalf("deadline: %+v, %v", res, err)
	}
	if res := mustExec(t, m, "k", "x"); plain(res) != "1" {
		t.Fatalf("state after timeouts: %+v", res)
	}
}

func TestStop(t *testing.T) {
	d := sessiontest.NewDriver()
	m := newManager(t, d)
	mustExec(t, m, "k", "x = 1")
	if err := m.Stop(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if n := len(d.Containers()); n != 0 {
		t.Fatalf("%d containers after Stop", n)
	}
	if err := m.Stop(context.Background(), "k"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("second stop: %v, want ErrNotFound", err)
	}
	if res := mustExec(t, m, "k", "x"); res.Error == nil || res.ExecutionCount != 1 {
		t.Fatalf("after stop: %+v", res)
	}
}

func TestNewManagerReattaches(t *testing.T) {
	d := sessiontest.NewDriver()
	cfg := testConfig(t, nil)
	m1, err := session.NewManager(context.Background(), cfg, session.WithDriver(d))
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, m1, "k", "x = 42")
	if err := m1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m2 := startManager(t, d, cfg)
	if res := mustExec(t, m2, "k", "x"); plain(res) != "42" || res.ExecutionCount != 2 {
		t.Fatalf("after reattach: %+v", res)
	}
	if n := d.Created(); n != 1 {
		t.Fatalf("%d containers created, want 1", n)
	}
}

func TestPoolSizeBound(t *testing.T) {
	d := sessiontest.NewDriver()
	cfg := testConfig(t, func(c *config.Config) { c.PoolSize = 2 })
	m := startManager(t, d, cfg)
	warm := func(c session.Container) bool { return strings.HasPrefix(c.Name, m.Namespace()+"_pool_") }
	for i := range 6 {
		waitFor(t, func() bool { return m.PoolReady() == cfg.PoolSize })
		mustExec(t, m, fmt.Sprint("key-", i), "1")
	}
	waitFor(t, func() bool { return m.PoolReady() == cfg.PoolSize })
	// New keys at once: the replacement of a warm container starts only
	// after it took its session's name, so the bound holds here too.
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mustExec(t, m, fmt.Sprint("burst-", i), "1")
		}()
	}
	wg.Wait()
	waitFor(t, func() bool { return m.PoolReady() == cfg.PoolSize })
	if peak := d.Peak(warm); peak > cfg.PoolSize {
		t.Errorf("%d warm containers at once, want at most %d", peak, cfg.PoolSize)
	}
	if n := d.Created(); n != 12+cfg.PoolSize {
		t.Errorf("%d containers created for 12 sessions and a pool of %d", n, cfg.PoolSize)
	}
}

func TestConcurrentKeysShareThePool(t *testing.T) {
	d := sessiontest.NewDriver()
	cfg := testConfig(t, func(c *config.Config) { c.PoolSize = 2 })
	m := startManager(t, d, cfg)
	waitFor(t, func() bool { return m.PoolReady() == cfg.PoolSize })
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Exec(context.Background(), fmt.Sprint("key-", i), "1"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool { return m.PoolReady() == cfg.PoolSize })
	sessions := 0
	for _, c := range d.Containers() {
		if !strings.HasPrefix(c.Name, m.Namespace()+"_pool_") {
			sessions++
		}
	}
	if sessions != 6 {
		t.Fatalf("%d session containers, want 6", sessions)
	}
	list, err := m.List(context.Background())
	if err != nil || len(list) != 6 {
		t.Errorf("list: %d sessions, want 6: %+v, %v", len(list), list, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
