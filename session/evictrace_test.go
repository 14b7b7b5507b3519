package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
)

// TestExecBegunAsTheSweepDecidesIsKept: an execution that begins in one
// process while another process's sweep is deciding to evict the session
// (idle past its timeout a moment before) is not cut off: the eviction is
// decided in the database against the execution's start. Before, the
// sweep read the last use, still old, and removed the container under the
// running code: "session lost: container ... was removed".
func TestExecBegunAsTheSweepDecidesIsKept(t *testing.T) {
	t.Parallel()
	cfg, ns, a := idleSession(t, "x = 41")
	ctx := ctxMinute(t)
	st := openStore(t, cfg)
	type outcome struct {
		res *session.Result
		err error
	}
	done := make(chan outcome, 1)
	begin := func() {
		go func() {
			res, err := a.Exec(ctx, "k", "import time\ntime.sleep(2)\nx + 1")
			done <- outcome{res, err}
		}()
		// Until the execution's start is recorded: its code runs.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if open, err := st.OpenIntents(ctx, ns, session.ID("k")); err == nil && len(open) > 0 {
				return
			}
		}
		t.Error("the execution never started")
	}
	managerFor(t, cfg, ns, session.WithDriver(hookEngine(t, beforeCommand, begin)), session.WithSweepInterval(time.Hour)) // sweeps once, now
	got := <-done
	if got.err != nil {
		t.Fatalf("an execution begun as another process's sweep decided: %v", got.err)
	}
	if got.res.StateLost || plain(got.res) != "42" {
		t.Fatalf("an execution begun as another process's sweep decided: %q, StateLost %v (%s)", plain(got.res), got.res.StateLost, got.res.RestartReason)
	}
	if in := mustInfo(t, a, "k"); !strings.Contains(in.State, "running") {
		t.Fatalf("the session after its execution: %+v", in)
	}
}

// TestExecAfterTheSweepDecidedRunsFresh: a call that reaches a session
// after another process's sweep decided to evict it, but before the
// container is gone, runs in a fresh session that says why, and never in
// the container that is about to go (where its result would be lost).
func TestExecAfterTheSweepDecidedRunsFresh(t *testing.T) {
	t.Parallel()
	cfg, ns, a := idleSession(t, "x = 41")
	ctx := ctxMinute(t)
	old := containerOf(t, a, "k")
	var (
		res *session.Result
		err error
	)
	hook := hookEngine(t, beforeRemove, func() { res, err = a.Exec(ctx, "k", "'x' in globals()") })
	managerFor(t, cfg, ns, session.WithDriver(hook), session.WithSweepInterval(time.Hour)) // sweeps once, now
	select {
	case <-hook.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the sweep did not evict the idle session")
	}
	if err != nil {
		t.Fatalf("a call after another process's sweep decided to evict the session: %v", err)
	}
	if plain(res) != "False" || !res.StateLost || !strings.Contains(res.RestartReason, "evicted after") {
		t.Fatalf("a call after the eviction was decided: %q, StateLost %v, reason %q; want a fresh session that says why", plain(res), res.StateLost, res.RestartReason)
	}
	if got := containerOf(t, a, "k"); got == old {
		t.Fatalf("the evicted container %s still serves the session", old)
	}
}
