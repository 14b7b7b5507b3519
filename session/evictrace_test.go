package session_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/session"
)

// probeThenAct is the real engine whose first command, once armed, runs
// act before it starts: for a sweep, that is its look for commands in a
// session it found idle, after it found no execution in progress and
// before it reads the session's last use again and removes it.
type probeThenAct struct {
	session.Driver
	cs   commandStreamer
	once *sync.Once
	act  func()
}

func (d probeThenAct) StreamCommand(ctx context.Context, id, user string, cmd []string) (session.CommandStream, error) {
	d.once.Do(d.act)
	return d.cs.StreamCommand(ctx, id, user, cmd)
}

// TestExecBegunAsTheSweepDecidesIsKept: an execution that begins in one
// process while another process's sweep is deciding to evict the session
// (idle past its timeout a moment before) is not cut off: the eviction is
// decided in the database against the execution's start. Before, the
// sweep read the last use, still old, and removed the container under the
// running code: "session lost: container ... was removed".
func TestExecBegunAsTheSweepDecidesIsKept(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = time.Second })
	ns := namespace()
	ctx := ctxMinute(t)
	a := managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	mustExec(t, a, "k", "x = 41")
	time.Sleep(1500 * time.Millisecond) // idle past its timeout

	st, err := store.Open(ctx, cfg.ArtifactsDB)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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
	d, cs := engineDriver(t)
	managerFor(t, cfg, ns, session.WithDriver(probeThenAct{Driver: d, cs: cs, once: new(sync.Once), act: begin}), session.WithSweepInterval(time.Hour)) // sweeps once, now
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

// removeThenAct is the real engine whose first Remove, once armed, runs act
// before it removes: for a sweep, that is right after it decided the
// eviction.
type removeThenAct struct {
	session.Driver
	cs   commandStreamer
	once *sync.Once
	act  func()
}

func (d removeThenAct) StreamCommand(ctx context.Context, id, user string, cmd []string) (session.CommandStream, error) {
	return d.cs.StreamCommand(ctx, id, user, cmd)
}

func (d removeThenAct) Remove(ctx context.Context, id string) error {
	d.once.Do(d.act)
	return d.Driver.Remove(ctx, id)
}

// TestExecAfterTheSweepDecidedRunsFresh: a call that reaches a session
// after another process's sweep decided to evict it, but before the
// container is gone, runs in a fresh session that says why, and never in
// the container that is about to go (where its result would be lost).
func TestExecAfterTheSweepDecidedRunsFresh(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = time.Second })
	ns := namespace()
	ctx := ctxMinute(t)
	a := managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	mustExec(t, a, "k", "x = 41")
	old := containerOf(t, a, "k")
	time.Sleep(1500 * time.Millisecond) // idle past its timeout

	var (
		res *session.Result
		err error
	)
	used := make(chan struct{})
	use := func() {
		defer close(used)
		res, err = a.Exec(ctx, "k", "'x' in globals()")
	}
	d, cs := engineDriver(t)
	hook := removeThenAct{Driver: d, cs: cs, once: new(sync.Once), act: use}
	managerFor(t, cfg, ns, session.WithDriver(hook), session.WithSweepInterval(time.Hour)) // sweeps once, now
	select {
	case <-used:
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
