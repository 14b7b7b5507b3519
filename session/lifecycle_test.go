package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

func ctxMinute(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustInfo(t *testing.T, m *session.Manager, key string) session.Info {
	t.Helper()
	in, err := m.Info(context.Background(), key)
	if err != nil {
		t.Fatalf("info %q: %v", key, err)
	}
	return in
}

// TestPausedSessionRefusesExec: a paused session's container is frozen in
// the engine; an Exec on it, from the process that paused it or from
// another one already connected, fails at once with ErrPaused (never
// waits on the frozen kernel, never takes it for dead); Resume brings it
// back with its state.
func TestPausedSessionRefusesExec(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	a := managerFor(t, cfg, ns)
	b := managerFor(t, cfg, ns)
	ctx := ctxMinute(t)
	mustExec(t, a, "k", "x = 41")
	mustExec(t, b, "k", "x") // b holds a connection too
	if err := a.Pause(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := a.Pause(ctx, "k"); err != nil {
		t.Fatalf("pause a paused session: %v", err)
	}
	cli := dockertest.Engine(t)
	st, err := cli.InspectContainer(ctx, containerOf(t, a, "k"))
	if err != nil || !st.Paused {
		t.Fatalf("the engine says paused=%v (%v)", st.Paused, err)
	}
	for name, m := range map[string]*session.Manager{"the pausing manager": a, "another manager": b} {
		start := time.Now()
		_, err := m.Exec(ctx, "k", "x + 1")
		var se *session.Error
		if !errors.Is(err, session.ErrPaused) || !errors.As(err, &se) || se.Key != "k" {
			t.Errorf("%s: exec on a paused session: %v, want ErrPaused naming the key", name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: the refusal took %s", name, d)
		}
		if _, err := m.Inspect(ctx, "k"); !errors.Is(err, session.ErrPaused) {
			t.Errorf("%s: inspect on a paused session: %v", name, err)
		}
	}
	in := mustInfo(t, b, "k")
	if in.State != session.StatePaused || in.Paused.IsZero() {
		t.Errorf("Info from another manager: state %q, paused %v", in.State, in.Paused)
	}
	if err := b.Resume(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := b.Resume(ctx, "k"); err != nil {
		t.Fatalf("resume a running session: %v", err)
	}
	for _, m := range []*session.Manager{a, b} {
		if res := mustExec(t, m, "k", "x += 1\nx"); res.StateLost {
			t.Fatalf("state lost across the pause: %s", res.RestartReason)
		}
	}
	if got := plain(mustExec(t, a, "k", "x")); got != "43" {
		t.Errorf("x = %s after the pause, want 43", got)
	}
	if in := mustInfo(t, a, "k"); in.State != session.StateRunning || !in.Paused.IsZero() {
		t.Errorf("after resume: state %q, paused %v", in.State, in.Paused)
	}
}

// TestPauseManagerRestartResume: pause, the manager goes (a new process),
// a new one finds the session paused (an Exec is refused, not taken for a
// dead kernel), resumes it, and the Python state is intact; under runc and
// under gVisor (runsc), whose pause is its own.
func TestPauseManagerRestartResume(t *testing.T) {
	t.Parallel()
	for _, runtime := range []string{"runc", "runsc"} {
		t.Run(runtime, func(t *testing.T) {
			t.Parallel()
			pauseRestartResume(t, runtime)
		})
	}
}

func pauseRestartResume(t *testing.T, runtime string) {
	cfg := testConfig(t, func(c *config.Config) { c.Runtime = runtime })
	ns := namespace()
	ctx := ctxMinute(t)
	a := managerFor(t, cfg, ns)
	if _, err := a.Exec(ctx, "k", "1"); err != nil && strings.Contains(err.Error(), "runtime") {
		t.Skipf("no %s runtime in this engine: %v", runtime, err)
	}
	mustExec(t, a, "k", "import math\nstate = {'n': 7}")
	if err := a.Pause(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	id := containerOf(t, a, "k")
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b := managerFor(t, cfg, ns)
	if _, err := b.Exec(ctx, "k", "state"); !errors.Is(err, session.ErrPaused) {
		t.Fatalf("exec on a paused session after a restart: %v, want ErrPaused", err)
	}
	if in := mustInfo(t, b, "k"); in.State != session.StatePaused || in.ContainerID != id {
		t.Fatalf("after the restart: state %q, container %s (was %s)", in.State, in.ContainerID, id)
	}
	if err := b.Resume(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, b, "k", "state['n'] * math.floor(6.5)")
	if res.StateLost || plain(res) != "42" {
		t.Fatalf("after pause, restart, resume: %q, state lost %v (%s)", plain(res), res.StateLost, res.RestartReason)
	}
	if got := containerOf(t, b, "k"); got != id {
		t.Errorf("container %s replaced by %s", id, got)
	}
}

// TestPausedSessionNotSweptIdle: a paused session outlives many idle
// timeouts, under the sweep of its own manager and of another; resumed,
// it counts as used, so the next sweep does not evict it at once.
func TestPausedSessionNotSweptIdle(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = 2 * time.Second })
	ns := namespace()
	ctx := ctxMinute(t)
	// A short orphan grace too: a paused container is not an unusable one.
	fast := []session.Option{session.WithSweepInterval(100 * time.Millisecond), session.WithOrphanGrace(3 * time.Second)}
	a := managerFor(t, cfg, ns, fast...)
	mustExec(t, a, "k", "x = 'kept'")
	if err := a.Pause(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	// Another process's sweep, started once the session exists (see
	// sweepers).
	managerFor(t, cfg, ns, fast...)
	time.Sleep(6 * time.Second) // three idle timeouts, some sixty sweeps each
	if in := mustInfo(t, a, "k"); in.State != session.StatePaused {
		t.Fatalf("paused session after three idle timeouts: %+v", in)
	}
	if err := a.Resume(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, a, "k", "x")
	if res.StateLost || plain(res) != "'kept'" {
		t.Fatalf("after resume: %q, state lost %v (%s)", plain(res), res.StateLost, res.RestartReason)
	}
}

// TestPauseBusyElsewhere: a session running an execution in another
// process is not frozen under it: Pause says ErrBusy.
func TestPauseBusyElsewhere(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	ctx := ctxMinute(t)
	a := managerFor(t, cfg, ns)
	b := managerFor(t, cfg, ns)
	mustExec(t, a, "k", "import time")
	done := make(chan error, 1)
	go func() {
		_, err := a.Exec(ctx, "k", "time.sleep(3)")
		done <- err
	}()
	time.Sleep(time.Second)
	if err := b.Pause(ctx, "k"); !errors.Is(err, session.ErrBusy) {
		t.Errorf("pause while another process runs code: %v, want ErrBusy", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Its own manager waits for the call instead.
	go func() {
		_, err := a.Exec(ctx, "k", "time.sleep(1); y = 1")
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := a.Pause(ctx, "k"); err != nil {
		t.Fatalf("pause after this process's call: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if err := a.Resume(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got := plain(mustExec(t, a, "k", "y")); got != "1" {
		t.Errorf("y = %q", got)
	}
}

// TestTTLRenewAcrossManagers: a session created with a time to live in one
// process is renewed by another, which the first's sweep honours; past
// the renewed expiry the other's sweep removes it, the first sees it
// stopped (Info) and its next Exec starts afresh and says why.
func TestTTLRenewAcrossManagers(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	ctx := ctxMinute(t)
	fast := session.WithSweepInterval(100 * time.Millisecond)
	a := managerFor(t, cfg, ns, fast)
	// The time to live counts from creation: 10 s leaves a loaded machine
	// room to start the session before a's sweep expires it (5 s did not,
	// under make test: "session lost: ... killed (exit code 137)").
	mustExec(t, a, "k", "x = 1", session.CreateWith(session.TTL(10*time.Second)))
	first := mustInfo(t, a, "k")
	if first.Expires.IsZero() || first.Limits == nil || first.Limits.TTL != 10*time.Second {
		t.Fatalf("created with a TTL of 10s: %+v", first)
	}
	b := managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	exp, err := b.Renew(ctx, "k", 14*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if in := mustInfo(t, a, "k"); !in.Expires.Equal(exp.Truncate(time.Millisecond)) {
		t.Errorf("a sees expiry %v, b renewed to %v", in.Expires, exp)
	}
	time.Sleep(time.Until(first.Expires) + time.Second) // past the first expiry, under a's sweep
	if res := mustExec(t, a, "k", "x"); res.StateLost || plain(res) != "1" {
		t.Fatalf("renewed session lost at its first expiry: %q (%s)", plain(res), res.RestartReason)
	}
	// Now b sweeps, a does not: b removes it at the renewed expiry.
	a.Close(ctx)
	a = managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	managerFor(t, cfg, ns, fast)
	time.Sleep(time.Until(exp) + time.Second)
	in := mustInfo(t, a, "k")
	if in.State != session.StateStopped || !strings.HasPrefix(in.StopReason, "expired") {
		t.Fatalf("past the renewed expiry: state %q (%s)", in.State, in.StopReason)
	}
	if _, err := a.Renew(ctx, "k", time.Minute); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("renew an expired, removed session: %v", err)
	}
	res := mustExec(t, a, "k", "'x' in globals()")
	if !res.StateLost || !strings.Contains(res.RestartReason, "time to live") || plain(res) != "False" {
		t.Errorf("the fresh session: %q, state lost %v, reason %q", plain(res), res.StateLost, res.RestartReason)
	}
}

// TestTTLEnforcedAtCall: with no sweep to remove it, a session past its
// expiry is still never used again: the next call removes it, an Exec
// starts a fresh one, a lookup says ErrExpired.
func TestTTLEnforcedAtCall(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.SessionTTL = 2 * time.Second })
	ns := namespace()
	ctx := ctxMinute(t)
	a := managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	mustExec(t, a, "k", "x = 1") // the configured TTL
	mustExec(t, a, "j", "x = 1")
	id := containerOf(t, a, "k")
	time.Sleep(2500 * time.Millisecond)
	if _, err := a.Inspect(ctx, "j"); !errors.Is(err, session.ErrExpired) {
		t.Errorf("inspect past the expiry: %v, want ErrExpired", err)
	}
	if _, err := a.Renew(ctx, "k", time.Minute); !errors.Is(err, session.ErrExpired) {
		t.Errorf("renew past the expiry: %v, want ErrExpired", err)
	}
	res := mustExec(t, a, "k", "'x' in globals()")
	if plain(res) != "False" || !res.StateLost || !strings.Contains(res.RestartReason, "expired") {
		t.Errorf("exec past the expiry: %q, state lost %v (%s)", plain(res), res.StateLost, res.RestartReason)
	}
	if got := containerOf(t, a, "k"); got == id {
		t.Error("the expired container serves on")
	}
}

// TestEnvPerSession: a session's environment reaches its code and no other
// session's; options given to an existing session are ignored.
func TestEnvPerSession(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.PoolSize = 1 })
	ctx := ctxMinute(t)
	get := "import os; os.environ.get('GREETING'), os.environ.get('ONLY_A')"
	if _, err := m.Start(ctx, "a", session.Env(map[string]string{"GREETING": "hello a", "ONLY_A": "1"})); err != nil {
		t.Fatal(err)
	}
	if got := plain(mustExec(t, m, "b", get, session.CreateWith(session.Env(map[string]string{"GREETING": "hello b"})))); got != "('hello b', None)" {
		t.Errorf("b sees %s", got)
	}
	if got := plain(mustExec(t, m, "c", get)); got != "(None, None)" {
		t.Errorf("c, created with no env (from the warm pool), sees %s", got)
	}
	if got := plain(mustExec(t, m, "a", get, session.CreateWith(session.Env(map[string]string{"GREETING": "changed"})))); got != "('hello a', '1')" {
		t.Errorf("a sees %s", got)
	}
	// A subprocess of the code inherits it; the root init's environment
	// is the container's, so it is not what a variable could steer (see
	// TestHostileOptionsRefused).
	if got := plain(mustExec(t, m, "a", "import subprocess; subprocess.run(['sh', '-c', 'echo $GREETING'], capture_output=True, text=True).stdout")); got != `'hello a\n'` {
		t.Errorf("a's subprocess sees %s", got)
	}
}

// TestLimitsAndImageChosen: memory and CPUs within the maxima are what the
// container gets; above them, or an image not listed, nothing is created.
func TestLimitsAndImageChosen(t *testing.T) {
	t.Parallel()
	var cfg config.Config
	m := newManager(t, func(c *config.Config) {
		c.MaxMemoryMB = 2048
		c.MaxCPUs = 2
		c.SandboxImages = map[string]string{"alt": c.SandboxImage, "gone": "agentbox-sandbox:no-such-tag"}
		cfg = *c
	})
	ctx := ctxMinute(t)
	for _, tt := range []struct {
		opt session.StartOption
		err error
	}{
		{session.MemoryMB(2049), session.ErrAboveMaximum},
		{session.CPUs(2.5), session.ErrAboveMaximum},
		{session.UseImage("latest"), session.ErrImageNotAllowed},
		{session.UseImage("gone"), session.ErrImageNotAllowed},
	} {
		_, err := m.Exec(ctx, "over", "1", session.CreateWith(tt.opt))
		if !errors.Is(err, tt.err) {
			t.Errorf("got %v, want %v", err, tt.err)
		}
	}
	if _, err := m.Exec(ctx, "over", "1", session.CreateWith(session.UseImage("gone"))); !errors.Is(err, session.ErrImageMissing) {
		t.Errorf("an image listed but missing: %v, want it to say ErrImageMissing", err)
	}
	if list, _ := m.List(ctx); len(list) != 0 {
		t.Errorf("refused options left sessions: %+v", list)
	}
	in, err := m.Start(ctx, "big", session.MemoryMB(1536), session.CPUs(1.5), session.UseImage("alt"),
		session.Labels(map[string]string{"owner": "alice"}))
	if err != nil {
		t.Fatal(err)
	}
	if in.Limits == nil || in.Limits.MemoryMB != 1536 || in.Limits.CPUs != 1.5 || in.Image != "alt" || in.Labels["owner"] != "alice" {
		t.Errorf("Info: %+v, limits %+v", in, in.Limits)
	}
	// cgroup v2 paths first, then v1's.
	got := plain(mustExec(t, m, "big", `import os
def first(*paths):
    for p in paths:
        if os.path.exists(p):
            return open(p).read().split()[0]
first('/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes'), first('/sys/fs/cgroup/cpu.max', '/sys/fs/cgroup/cpu/cpu.cfs_quota_us')`))
	// 1536 MiB for the processes, and the files in memory apart: /session
	// (64 MiB here), /tmp (256) and /dev/shm (64).
	if got != "('2013265920', '150000')" {
		t.Errorf("the container's cgroup limits: %s", got)
	}
	// Another process sees what it was created with.
	other := managerFor(t, cfg, m.Namespace())
	if in := mustInfo(t, other, "big"); in.Limits.MemoryMB != 1536 || in.Image != "alt" || in.Labels["owner"] != "alice" || in.MemoryBytes == 0 {
		t.Errorf("Info from another manager: %+v, limits %+v", in, in.Limits)
	}
	if _, err := other.Info(ctx, "never"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Info of no session: %v", err)
	}
	// The same answer without the engine's memory reading (what a server
	// asks before each call), but for the memory.
	in, err = other.Info(ctx, "big", session.WithoutMemoryUse())
	if err != nil || in.State != session.StateRunning || in.Limits.MemoryMB != 1536 || in.Labels["owner"] != "alice" || in.MemoryBytes != 0 {
		t.Errorf("Info without memory use: %+v, %v", in, err)
	}
}

// TestExternalPauseIsNotALoss: a container frozen behind the Manager's back
// (docker pause) makes an Exec in flight fail with ErrPaused once the init
// misses its ping, never a lost session whose container is removed; thawed,
// the session serves on with its state, and the execution that waited is
// recorded once.
func TestExternalPauseIsNotALoss(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := ctxMinute(t)
	mustExec(t, m, "k", "x = 1")
	id := containerOf(t, m, "k")
	cli := dockertest.Engine(t)
	// As Manager.Pause does: cgroup v1's freezer may give up on a busy
	// machine ("unable to freeze"), and runc leaves the retry to us.
	for try := 1; ; try++ {
		err := cli.PauseContainer(ctx, id)
		if err == nil {
			break
		}
		if try == 4 || !strings.Contains(err.Error(), "unable to freeze") {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	_, err := m.Exec(ctx, "k", "x += 1", session.Timeout(time.Second))
	if !errors.Is(err, session.ErrPaused) || errors.Is(err, session.ErrSessionLost) {
		t.Fatalf("exec on a container paused from outside: %v, want ErrPaused", err)
	}
	if in := mustInfo(t, m, "k"); in.State != session.StatePaused || in.ContainerID != id {
		t.Fatalf("after the refused exec: %+v", in)
	}
	if err := cli.UnpauseContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, m, "k", "x")
	if res.StateLost || containerOf(t, m, "k") != id {
		t.Fatalf("after the thaw: state lost %v (%s)", res.StateLost, res.RestartReason)
	}
	if got := plain(res); got != "1" && got != "2" {
		t.Errorf("x = %s", got)
	}
}

// TestStopPausedSession: a paused session can be stopped (its frozen
// container removed), and the key then starts afresh.
func TestStopPausedSession(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := ctxMinute(t)
	mustExec(t, m, "k", "x = 1")
	if err := m.Pause(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx, "k"); err != nil {
		t.Fatalf("stop a paused session: %v", err)
	}
	if in := mustInfo(t, m, "k"); in.State != session.StateStopped {
		t.Errorf("after stop: %+v", in)
	}
	if err := m.Resume(ctx, "k"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("resume a stopped session: %v, want ErrNotFound", err)
	}
	if got := plain(mustExec(t, m, "k", "'x' in globals()")); got != "False" {
		t.Errorf("the key after stop: %s", got)
	}
}
