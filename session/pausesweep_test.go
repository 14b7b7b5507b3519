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
