package session_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// stopInit stops a session's PID 1 from the host (SIGSTOP to the process
// the engine started: the init under runc, the whole sandbox under runsc),
// the state a ptrace attach used to leave it in. It is continued at cleanup
// so the container can be removed.
func stopInit(t *testing.T, id string) {
	t.Helper()
	st, err := dockertest.Engine(t).InspectContainer(context.Background(), id)
	if err != nil || st.Pid <= 0 {
		t.Fatalf("inspect %s: pid %d, %v", id, st.Pid, err)
	}
	if err := syscall.Kill(st.Pid, syscall.SIGSTOP); err != nil {
		t.Skipf("cannot stop the container's first process from here: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(st.Pid, syscall.SIGCONT) })
}

// TestStoppedInitIsALostSession: whatever state the init is in, a host call
// returns within the execution's timeout plus the grace period plus a few
// seconds, says the session was lost and why, and the next call gets a fresh
// session. Before, a stopped init hung every later call on the session,
// past EXEC_TIMEOUT_S, in every process.
func TestStoppedInitIsALostSession(t *testing.T) {
	t.Parallel()
	const timeout, grace = 2 * time.Second, time.Second
	// What the host may add: the interrupt margin, a ping's timeout, and
	// room for a loaded machine.
	const bound = timeout + grace + 15*time.Second
	cases := []struct {
		name string
		// run stops the init of the session "k" on m, calls it as the case
		// says, and returns the call's error and the manager that made it.
		run func(t *testing.T, m *session.Manager, cfg config.Config, ns string) (*session.Manager, error)
	}{
		{"stopped while idle", func(t *testing.T, m *session.Manager, _ config.Config, _ string) (*session.Manager, error) {
			stopInit(t, containerOf(t, m, "k"))
			_, err := m.Exec(context.Background(), "k", "x", session.Timeout(timeout))
			return m, err
		}},
		{"stopped mid-execution", func(t *testing.T, m *session.Manager, _ config.Config, _ string) (*session.Manager, error) {
			id := containerOf(t, m, "k")
			started := make(chan struct{})
			var once sync.Once
			done := make(chan error, 1)
			go func() {
				// print writes "go" and "\n" apart (the kernel's output is
				// unbuffered): they may come in one event or two.
				_, err := m.Exec(context.Background(), "k", "import time\nprint('go', flush=True)\ntime.sleep(60)", session.Timeout(timeout),
					session.OnEvent(func(e kernel.Event) {
						if strings.Contains(e.Text, "go") {
							once.Do(func() { close(started) })
						}
					}))
				done <- err
			}()
			select {
			case <-started:
			case <-time.After(time.Minute):
				t.Fatal("the execution never started")
			}
			stopInit(t, id)
			return m, <-done
		}},
		{"stopped, then a new process", func(t *testing.T, m *session.Manager, cfg config.Config, ns string) (*session.Manager, error) {
			stopInit(t, containerOf(t, m, "k"))
			m2 := managerFor(t, cfg, ns)
			_, err := m2.Exec(context.Background(), "k", "x", session.Timeout(timeout))
			return m2, err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if dockertest.IsGVisor() && strings.HasPrefix(c.name, "stopped, then") {
				t.Skip("under gVisor the stopped process is the sandbox's whole kernel, and the engine blocks on that container (inspect, rename, exec) until it runs again; only the host can do this, and a new process cannot tell it from a slow engine (README, gVisor)")
			}
			// Not parallel: parallel subtests queue behind every test not
			// yet started, and would run last, at the tail of the package.
			cfg := testConfig(t, func(c *config.Config) { c.InterruptGrace = grace })
			ns := namespace()
			m := managerFor(t, cfg, ns)
			mustExec(t, m, "k", "x = 1")
			id := containerOf(t, m, "k")
			start := time.Now()
			m, err := c.run(t, m, cfg, ns)
			took := time.Since(start)
			if !errors.Is(err, session.ErrSessionLost) || !strings.Contains(err.Error(), "answer") {
				t.Fatalf("got %v, want ErrSessionLost saying the init does not answer", err)
			}
			if took > bound {
				t.Fatalf("the call took %s, more than timeout + grace + margin (%s)", took, bound)
			}
			if dockertest.IsGVisor() {
				// The stopped process is the sandbox's whole kernel: the
				// engine cannot remove it before it runs again (the
				// cleanup continues it), and holds the container while it
				// tries; it must have given up the session's name.
				ictx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if c, err := dockertest.Engine(t).InspectContainer(ictx, ns+"_"+session.ID("k")); err == nil && c.ID == id {
					t.Fatalf("the unresponsive container %s still holds the session's name", id)
				}
			} else if _, err := dockertest.Engine(t).InspectContainer(context.Background(), id); err == nil {
				t.Fatalf("the unresponsive container %s is still there", id)
			}
			res := mustExec(t, m, "k", "'x' in globals()")
			if plain(res) != "False" || res.ExecutionCount != 1 {
				t.Fatalf("want a fresh session, got %+v", res)
			}
		})
	}
}

// slowBridge is the engine's driver on a machine so loaded that a new
// connection's bridge takes delay to hand its stream to the init: its
// first read waits that long. Everything else is the real engine.
type slowBridge struct {
	session.Driver
	cs    commandStreamer
	delay time.Duration
}

func (d slowBridge) StreamCommand(ctx context.Context, id, user string, cmd []string) (session.CommandStream, error) {
	return d.cs.StreamCommand(ctx, id, user, cmd)
}

func (d slowBridge) Connect(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	rw, err := d.Driver.Connect(ctx, id)
	if err != nil {
		return nil, err
	}
	return &slowStream{ReadWriteCloser: rw, until: time.Now().Add(d.delay), closed: make(chan struct{})}, nil
}

type slowStream struct {
	io.ReadWriteCloser
	until  time.Time
	once   sync.Once
	closed chan struct{}
}

func (s *slowStream) Read(p []byte) (int, error) {
	select {
	case <-time.After(time.Until(s.until)):
	case <-s.closed:
	}
	return s.ReadWriteCloser.Read(p)
}

func (s *slowStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.ReadWriteCloser.Close()
}

// TestSlowHelloKeepsTheSession: an init that runs but greets a new
// process late (its bridge was slow to start on a loaded machine) is not
// taken for a stopped one: the session, its state and its container stay.
// Before, a hello later than 10 s removed the container, and the state of
// every session reattached on a loaded host went with it.
func TestSlowHelloKeepsTheSession(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	m := managerFor(t, cfg, ns)
	mustExec(t, m, "k", "x = 41")
	id := containerOf(t, m, "k")

	d, cs := engineDriver(t)
	slow := managerFor(t, cfg, ns, session.WithDriver(slowBridge{Driver: d, cs: cs, delay: 14 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := slow.Exec(ctx, "k", "x + 1")
	if err != nil {
		t.Fatalf("a late hello from a running init: %v", err)
	}
	if res.StateLost || plain(res) != "42" {
		t.Fatalf("a late hello from a running init: %q, StateLost %v (%s)", plain(res), res.StateLost, res.RestartReason)
	}
	if got := containerOf(t, slow, "k"); got != id {
		t.Fatalf("container %s replaced by %s", id, got)
	}
}
