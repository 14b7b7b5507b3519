package session_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
	"github.com/agentbox/agentbox/session"
)

type commandStreamer interface {
	StreamCommand(ctx context.Context, id, user string, cmd []string) (session.CommandStream, error)
}

// engineDriver returns the real engine's driver, and its commands.
func engineDriver(t *testing.T) (session.Driver, commandStreamer) {
	t.Helper()
	dockertest.Engine(t)
	d, closer, err := session.NewDockerDriver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	cs, ok := d.(commandStreamer)
	if !ok {
		t.Fatal("the engine's driver runs no commands")
	}
	return d, cs
}

// isSupervisor tells a shell command's supervisor from the other commands
// the manager runs in a container (probes).
func isSupervisor(cmd []string) bool {
	return len(cmd) > 0 && cmd[len(cmd)-1] == sandboximage.SupervisorPath
}

// slowCommandStart is the real engine, slow to start a shell command's
// supervisor, as a loaded engine is: started is closed when the first
// one is asked for, which then waits delay. On the channel, a command's
// first start is the channel's stream: once armed, the next stream opened
// is slow so.
type slowCommandStart struct {
	session.Driver
	cs      commandStreamer
	delay   time.Duration
	started chan struct{}
	armed   atomic.Bool
}

func (d *slowCommandStart) slow() {
	select {
	case <-d.started:
	default:
		close(d.started)
	}
	time.Sleep(d.delay)
}

func (d *slowCommandStart) StreamCommand(ctx context.Context, id, user string, cmd []string) (session.CommandStream, error) {
	if isSupervisor(cmd) {
		d.slow()
	}
	return d.cs.StreamCommand(ctx, id, user, cmd)
}

func (d *slowCommandStart) Connect(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	if d.armed.CompareAndSwap(true, false) {
		d.slow()
	}
	return d.Driver.Connect(ctx, id)
}

// TestCommandStartCountsAsUse: a command counts as a use of its session
// from the moment it is asked for, in the history other processes read,
// not only once its supervisor runs: another manager's sweep that comes
// while the engine is slow to start it keeps the session. Before, such a
// sweep removed the container under the starting command.
func TestCommandStartCountsAsUse(t *testing.T) {
	t.Parallel()
	const idle = 4 * time.Second
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = idle })
	ns := namespace()
	d, cs := engineDriver(t)
	slow := &slowCommandStart{Driver: d, cs: cs, delay: 3 * time.Second, started: make(chan struct{})}
	m := managerFor(t, cfg, ns, session.WithDriver(slow), session.WithSweepInterval(time.Hour))
	mustExec(t, m, "k", "x = 41")
	id := containerOf(t, m, "k")
	time.Sleep(idle + 500*time.Millisecond) // idle past its timeout
	slow.armed.Store(true)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type ran struct {
		res *session.CommandResult
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := m.Run(ctx, "k", session.Command{Line: "echo done"})
		done <- ran{res, err}
	}()
	<-slow.started
	managerFor(t, cfg, ns, session.WithSweepInterval(100*time.Millisecond)) // another process, sweeping
	r := <-done
	if r.err != nil {
		t.Fatalf("a command asked for in an idle session, swept by another process while it starts: %v", r.err)
	}
	if r.res.Stdout != "done\n" {
		t.Fatalf("command output %q", r.res.Stdout)
	}
	if got := containerOf(t, m, "k"); got != id {
		t.Fatalf("container %s replaced by %s while a command started", id, got)
	}
	res := mustExec(t, m, "k", "x + 1")
	if res.StateLost || plain(res) != "42" {
		t.Fatalf("after the command: %q, StateLost %v (%s)", plain(res), res.StateLost, res.RestartReason)
	}
}

// removedAtStart is the real engine with a session's container removed
// just as a command starts in it: the exec was created, and the engine's
// answer to starting it is its own text on the stream, not the
// supervisor's frames (what the engine sends when a container goes between
// the two calls).
//
// On the channel (an init that runs tools), the command's start is the
// channel's first stream: the container goes as it is opened.
type removedAtStart struct {
	session.Driver
	cs    commandStreamer
	t     *testing.T
	armed *atomic.Bool
}

func (d removedAtStart) Connect(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	// Armed once the executions' stream is open: the next stream is the
	// channel's.
	if d.armed.CompareAndSwap(true, false) {
		if err := d.Driver.Remove(ctx, id); err != nil {
			d.t.Errorf("remove %s: %v", id, err)
		}
	}
	return d.Driver.Connect(ctx, id)
}

func (d removedAtStart) StreamCommand(ctx context.Context, id, user string, cmd []string) (session.CommandStream, error) {
	if !isSupervisor(cmd) {
		return d.cs.StreamCommand(ctx, id, user, cmd)
	}
	if err := d.Driver.Remove(ctx, id); err != nil {
		d.t.Errorf("remove %s: %v", id, err)
	}
	return &engineText{r: strings.NewReader("OCI runtime exec failed: exec failed: unable to start container process: container " + id + " is not running: unknown\r\n")}, nil
}

type engineText struct{ r io.Reader }

func (s *engineText) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s *engineText) Write(p []byte) (int, error) { return len(p), nil }
func (s *engineText) Close() error                { return nil }
func (s *engineText) CloseWrite() error           { return nil }
func (s *engineText) Stderr() string              { return "" }

// TestCommandInRemovedContainer: a command whose container is removed as
// it starts fails with ErrSessionLost saying so, not with a complaint
// about the size of a frame made of the engine's words.
func TestCommandInRemovedContainer(t *testing.T) {
	t.Parallel()
	d, cs := engineDriver(t)
	armed := new(atomic.Bool)
	m := newManager(t, nil, session.WithDriver(removedAtStart{Driver: d, cs: cs, t: t, armed: armed}))
	mustExec(t, m, "k", "x = 1")
	armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := m.Run(ctx, "k", session.Command{Line: "echo hi"})
	if !errors.Is(err, session.ErrSessionLost) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("got %v, want ErrSessionLost saying the container was removed", err)
	}
}
