package session_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// Tests of promises whose breakage no other test caught (issue 31): each
// fails on its breakage with a message naming the promise.

// TestCrashRecoveredByTheNextCall: a manager killed mid-execution loses
// nothing even when nobody retries its execution id: the next process's
// first call on the session finishes it (records its result once, stores
// its files), before running its own code.
func TestCrashRecoveredByTheNextCall(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	m := managerFor(t, cfg, ns)
	mustExec(t, m, "k", "x = 1") // the session exists before the kill
	code := "import os, time\nos.makedirs('/session/artifacts/out', exist_ok=True)\n" +
		"for i in range(5):\n    open('/session/artifacts/out/f%d.txt' % i, 'w').write(str(i))\n" +
		"print('written', flush=True)\ntime.sleep(2)\nprint('done')\n"
	killManagerAt(t, cfg, ns, "k", "crashed-1", code, func(l string) bool { return l == "OUT written" }, 0)

	m2 := managerFor(t, cfg, ns)
	mustExec(t, m2, "k", "y = 2") // a plain call, no retry of crashed-1
	if n := history(t, cfg, ns, "k", "crashed-1"); n != 1 {
		t.Fatalf("a crash loses nothing: the dead manager's execution is recorded %d times after the next call, want once", n)
	}
	arts, err := m2.Artifacts(ctx2m(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, a := range arts {
		if strings.HasPrefix(a.Name, "out/f") {
			stored++
		}
	}
	if stored != 5 {
		t.Fatalf("a crash loses nothing: %d of 5 files of the dead manager's execution stored", stored)
	}
	mustExec(t, m2, "k", "z = 3")
	if n := history(t, cfg, ns, "k", "crashed-1"); n != 1 {
		t.Fatalf("a recovered session is recovered once: the execution is recorded %d times", n)
	}
}

func ctx2m(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestPausedSessionExpiresAtItsTTL: a pause stops the idle clock, never the
// time to live: the sweep removes a paused session past its expiry.
func TestPausedSessionExpiresAtItsTTL(t *testing.T) {
	t.Parallel()
	cli := dockertest.Engine(t)
	m := newManager(t, nil, session.WithSweepInterval(100*time.Millisecond))
	ctx := ctx2m(t)
	// 10 s leaves a loaded machine room to start the session first.
	mustExec(t, m, "k", "x = 1", session.CreateWith(session.TTL(10*time.Second)))
	id := containerOf(t, m, "k")
	exp := mustInfo(t, m, "k").Expires
	if err := m.Pause(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	// The sweep, not a call, must remove it: only the engine is asked.
	deadline := exp.Add(30 * time.Second)
	for {
		_, err := cli.InspectContainer(ctx, id)
		if errors.Is(err, docker.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a paused session still expires at its TTL: container %.12s still there 30 s past its expiry %v", id, exp)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if in := mustInfo(t, m, "k"); !strings.HasPrefix(in.StopReason, "expired") {
		t.Errorf("a paused session still expires at its TTL: stop reason %q", in.StopReason)
	}
}

// TestTraceSumsValues: the span attributes that sum several values (bytes
// cut from each stream, bytes of each artifact) carry the sums.
func TestTraceSumsValues(t *testing.T) {
	t.Parallel()
	m, rec, _ := tracedManager(t, func(c *config.Config) { c.MaxOutputBytes = 1024 })
	res := mustExec(t, m, "k", "import sys\nprint('o' * 5000)\nprint('e' * 3000, file=sys.stderr)\n"+
		"open('/session/artifacts/a.txt', 'w').write('abc')\nopen('/session/artifacts/b.txt', 'w').write('defgh')")
	var cut int64
	for _, n := range res.Truncated {
		cut += n
	}
	if len(res.Truncated) != 2 || cut == 0 {
		t.Fatalf("want both streams cut: %v", res.Truncated)
	}
	sum := map[attribute.Key]string{session.AttrCutBytes: fmt.Sprint(cut), session.AttrArtifactBytes: "8", session.AttrArtifacts: "2"}
	exec := lastSpan(t, rec, session.SpanExec)
	for k, v := range sum {
		if got := attrs(exec)[k]; got.Emit() != v {
			t.Errorf("spans carry the summed attribute values: exec span %s = %q, want %q", k, got.Emit(), v)
		}
	}
	if got := attrs(lastSpan(t, rec, session.SpanIngest))[session.AttrArtifactBytes]; got.Emit() != "8" {
		t.Errorf("spans carry the summed attribute values: ingest span %s = %q, want 8", session.AttrArtifactBytes, got.Emit())
	}
}

// TestKernelRestartCounted: a kernel that dies and restarts is counted in
// agentbox_kernel_restarts_total.
func TestKernelRestartCounted(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := newManager(t, nil, session.WithMetrics(reg))
	mustExec(t, m, "k", "x = 1")
	res := mustExec(t, m, "k", "import os; os._exit(3)")
	if !res.KernelRestarted {
		t.Fatalf("os._exit did not restart the kernel: %+v", res)
	}
	if got := counter(t, reg, "agentbox_kernel_restarts_total", nil); got != 1 {
		t.Errorf("kernel restarts are counted in metrics: agentbox_kernel_restarts_total = %v, want 1", got)
	}
}

// TestListNeverFollowsALink: the files API describes a link planted in the
// session as a link, in a listing as in a stat, and never lists what lies
// behind a link to a folder.
func TestListNeverFollowsALink(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := ctx2m(t)
	mustExec(t, m, "k", "import os\nos.makedirs('/session/in/real')\nopen('/session/in/real/x', 'w').write('x')\n"+
		"os.symlink('/etc', '/session/in/dir')\nos.symlink('/etc/hostname', '/session/in/file')")
	l, err := m.ListFiles(ctx, "k", "/session/in", session.ListOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]session.FileType{}
	for _, e := range l.Entries {
		got[e.Path] = e.Type
		if strings.HasPrefix(e.Path, "/session/in/dir/") {
			t.Errorf("file operations never follow a link: listed %s behind a link to /etc", e.Path)
		}
	}
	for _, p := range []string{"/session/in/dir", "/session/in/file"} {
		if got[p] != session.TypeSymlink {
			t.Errorf("file operations never follow a link: %s listed as %q, want %q", p, got[p], session.TypeSymlink)
		}
	}
	if got["/session/in/real/x"] != session.TypeFile {
		t.Errorf("the real folder's file: %q (listing %v)", got["/session/in/real/x"], got)
	}
	if fi, err := m.StatFile(ctx, "k", "/session/in/file"); err != nil || fi.Type != session.TypeSymlink {
		t.Errorf("file operations never follow a link: stat of a planted link: %+v %v", fi, err)
	}
}

// TestCommandGetsTheDefaultTimeout: a shell command that names no timeout
// of its own is killed at EXEC_TIMEOUT_S.
func TestCommandGetsTheDefaultTimeout(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.ExecTimeout = 2 * time.Second })
	res, err := m.Run(ctx2m(t), "k", session.Command{Line: "sleep 30; echo finished"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || strings.Contains(res.Stdout, "finished") {
		t.Fatalf("a shell command without its own timeout gets the configured default (2s): timed out %v after %v, stdout %q",
			res.TimedOut, res.Duration, res.Stdout)
	}
}

// TestSweepSparesASessionBusyElsewhere: the idle sweep of one process never
// takes a session another process is running code in, however long ago
// that execution began. Here a short command in the same session, while
// the code runs, is its last use: past the idle timeout after it, no use
// and no execution is newer than what the sweep saw, and only the open
// execution says the session is busy. (The command runs in the sweeping
// process: in the executing one it would wait for the execution's turn.)
func TestSweepSparesASessionBusyElsewhere(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = 2 * time.Second })
	ns := namespace()
	ctx := ctx2m(t)
	a := managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	mustExec(t, a, "k", "import time; x = 1")
	b := managerFor(t, cfg, ns, session.WithSweepInterval(100*time.Millisecond))
	started := make(chan struct{})
	type answer struct {
		res *session.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var once bool
		res, err := a.Exec(ctx, "k", "time.sleep(8); print(x)", session.OnEvent(func(e kernel.Event) {
			if e.Type == kernel.EventStarted && !once {
				once = true
				close(started)
			}
		}))
		done <- answer{res, err}
	}()
	select {
	case <-started:
	case ans := <-done:
		t.Fatalf("the execution ended before it started: %+v %v", ans.res, ans.err)
	}
	if _, err := b.Run(ctx, "k", session.Command{Line: "true"}); err != nil {
		t.Fatalf("a command beside the execution: %v", err)
	}
	ans := <-done
	if ans.err != nil {
		t.Fatalf("the idle sweep never takes a session busy in another process: %v", ans.err)
	}
	if res := ans.res; res.StateLost || strings.TrimSpace(res.Stdout) != "1" || res.Error != nil {
		t.Fatalf("the idle sweep never takes a session busy in another process: %q, state lost %v (%s), %+v",
			res.Stdout, res.StateLost, res.RestartReason, res.Error)
	}
}
