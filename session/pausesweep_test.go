package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
)

// listThenAct is the real engine whose next List, once armed, runs act
// after taking its snapshot: the caller then works from a list that is
// out of date, as a sweep on a loaded machine does.
type listThenAct struct {
	session.Driver
	cs   commandStreamer
	once *sync.Once
	act  func()
	done chan struct{}
}

func (d listThenAct) StreamCommand(ctx context.Context, id, user string, cmd []string) (session.CommandStream, error) {
	return d.cs.StreamCommand(ctx, id, user, cmd)
}

func (d listThenAct) List(ctx context.Context, labels map[string]string) ([]session.Container, error) {
	list, err := d.Driver.List(ctx, labels)
	d.once.Do(func() {
		d.act()
		close(d.done)
	})
	return list, err
}

// TestPauseDuringSweepIsKept: a session paused while another process's
// sweep works from a list taken just before is not evicted as idle. Before,
// the sweep trusted its list, found the (frozen) container could not be
// asked about commands, and removed it: "evicted after -1s unused".
func TestPauseDuringSweepIsKept(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = time.Second })
	ns := namespace()
	ctx := ctxMinute(t)
	a := managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	mustExec(t, a, "k", "x = 'kept'")
	id := containerOf(t, a, "k")
	time.Sleep(1500 * time.Millisecond) // idle past its timeout

	d, cs := engineDriver(t)
	paused := make(chan error, 1)
	hook := listThenAct{Driver: d, cs: cs, once: new(sync.Once), done: make(chan struct{}), act: func() { paused <- a.Pause(ctx, "k") }}
	managerFor(t, cfg, ns, session.WithDriver(hook), session.WithSweepInterval(time.Hour)) // sweeps once, now
	<-hook.done
	if err := <-paused; err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the rest of that sweep
	in := mustInfo(t, a, "k")
	if in.State != session.StatePaused || in.ContainerID != id {
		t.Fatalf("paused during another process's sweep: state %q (%s), container %s (was %s)", in.State, in.StopReason, in.ContainerID, id)
	}
	if err := a.Resume(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if res := mustExec(t, a, "k", "x"); res.StateLost || plain(res) != "'kept'" {
		t.Fatalf("after resume: %q, state lost %v (%s)", plain(res), res.StateLost, res.RestartReason)
	}
}

// TestWarmContainerAdoptedDuringSweepIsKept: a warm container handed to a
// key while another process's sweep works from a list taken just before
// (where it still has its warm name) is a session, not an idle warm
// container, and keeps its state. Before, that sweep removed it under the
// new session.
func TestWarmContainerAdoptedDuringSweepIsKept(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) {
		c.PoolSize = 1
		c.IdleTimeout = time.Second
	})
	ns := namespace()
	a := managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	for deadline := time.Now().Add(time.Minute); a.PoolReady() < 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no warm container ready after a minute")
		}
	}
	time.Sleep(1500 * time.Millisecond) // older than the idle timeout

	d, cs := engineDriver(t)
	adopted := make(chan *session.Result, 1)
	hook := listThenAct{Driver: d, cs: cs, once: new(sync.Once), done: make(chan struct{}), act: func() {
		adopted <- mustExec(t, a, "k", "x = 41")
	}}
	managerFor(t, cfg, ns, session.WithDriver(hook), session.WithSweepInterval(time.Hour)) // sweeps once, now
	<-hook.done
	if res := <-adopted; res.StateLost {
		t.Fatalf("the first call: %+v", res)
	}
	time.Sleep(time.Second) // the rest of that sweep
	res, err := a.Exec(ctxMinute(t), "k", "x + 1")
	if err != nil {
		t.Fatalf("the session made from a warm container during another process's sweep: %v", err)
	}
	if res.StateLost || plain(res) != "42" {
		t.Fatalf("the session made from a warm container during another process's sweep: %q, StateLost %v (%s)", plain(res), res.StateLost, res.RestartReason)
	}
}
