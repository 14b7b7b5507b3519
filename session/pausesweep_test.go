package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
)

// hookPoint is where in a sweep a hookedEngine runs its act.
type hookPoint int

const (
	afterList     hookPoint = iota // the sweep then works from a list out of date
	beforeCommand                  // its look for commands in a session it found idle
	beforeRemove                   // right after it decided to remove a container
)

// hookedEngine is the real engine that runs act once, at one point of the
// first sweep of a manager made with it, as another process would on a
// loaded machine; done closes once act returned.
type hookedEngine struct {
	session.Driver
	cs   commandStreamer
	at   hookPoint
	act  func()
	once *sync.Once
	done chan struct{}
}

// hookEngine returns the real engine running act once at point at.
func hookEngine(t *testing.T, at hookPoint, act func()) hookedEngine {
	t.Helper()
	d, cs := engineDriver(t)
	return hookedEngine{Driver: d, cs: cs, at: at, act: act, once: new(sync.Once), done: make(chan struct{})}
}

func (d hookedEngine) fire(at hookPoint) {
	if at == d.at {
		d.once.Do(func() {
			d.act()
			close(d.done)
		})
	}
}

func (d hookedEngine) List(ctx context.Context, labels map[string]string) ([]session.Container, error) {
	list, err := d.Driver.List(ctx, labels)
	d.fire(afterList)
	return list, err
}

func (d hookedEngine) StreamCommand(ctx context.Context, id, user string, cmd []string) (session.CommandStream, error) {
	d.fire(beforeCommand)
	return d.cs.StreamCommand(ctx, id, user, cmd)
}

func (d hookedEngine) Remove(ctx context.Context, id string) error {
	d.fire(beforeRemove)
	return d.Driver.Remove(ctx, id)
}

// idleSession starts session "k" (code run in it) on a manager that never
// sweeps, under a 1 s idle timeout, and leaves it idle past that timeout.
func idleSession(t *testing.T, code string) (config.Config, string, *session.Manager) {
	t.Helper()
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = time.Second })
	ns := namespace()
	a := managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	mustExec(t, a, "k", code)
	time.Sleep(1500 * time.Millisecond)
	return cfg, ns, a
}

// TestPauseDuringSweepIsKept: a session paused while another process's
// sweep works from a list taken just before is not evicted as idle. Before,
// the sweep trusted its list, found the (frozen) container could not be
// asked about commands, and removed it: "evicted after -1s unused".
func TestPauseDuringSweepIsKept(t *testing.T) {
	t.Parallel()
	cfg, ns, a := idleSession(t, "x = 'kept'")
	ctx := ctxMinute(t)
	id := containerOf(t, a, "k")
	paused := make(chan error, 1)
	hook := hookEngine(t, afterList, func() { paused <- a.Pause(ctx, "k") })
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

	adopted := make(chan *session.Result, 1)
	hook := hookEngine(t, afterList, func() { adopted <- mustExec(t, a, "k", "x = 41") })
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
