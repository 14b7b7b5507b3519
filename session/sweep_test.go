package session_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
)

// The sweep removes sessions unused for their idle timeout, and only those:
// TestIdleSessionsAreSwept and TestEvictionIsReported show an idle one goes;
// these show a used one stays, whichever manager sweeps.

// sweepers returns the manager that uses the sessions, and a function that
// starts the sweep to watch: the user's own (another false), or that of a
// second manager on the same namespace, as another process is, while the
// user's own sweep waits an hour (another true). Both sweep with an idle
// timeout of idle. The second manager starts once the session exists: a
// sweep that runs while another process creates a session is not what
// these tests are about.
func sweepers(t *testing.T, idle time.Duration, another bool) (user *session.Manager, sweep func()) {
	t.Helper()
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = idle })
	ns := namespace()
	fast := session.WithSweepInterval(100 * time.Millisecond)
	if !another {
		return managerFor(t, cfg, ns, fast), func() {}
	}
	return managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour)), func() { managerFor(t, cfg, ns, fast) }
}

// usedNow uses session "k" (x = 41) right before the long call a test
// makes, and returns its container. Starting the second manager and
// finding the container may take longer than the idle timeout on a loaded
// machine, and a session idle that long is rightly swept before the call
// begins: that is not what these tests are about, so the session is set up
// again (setup, then at once this check, with nothing slow between), a few
// times at most.
func usedNow(t *testing.T, m *session.Manager, setup string) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		res := mustExec(t, m, "k", "x")
		if !res.StateLost && plain(res) == "41" {
			return containerOf(t, m, "k")
		}
		if attempt == 3 {
			t.Fatalf("session k lost before the long call began, %d times (the machine took longer than its idle timeout between two calls): %q, %s", attempt, plain(res), res.RestartReason)
		}
		t.Logf("session k was swept before the long call began (the machine took longer than its idle timeout to start a manager: %s); setting it up again", res.RestartReason)
		mustExec(t, m, "k", setup)
	}
}

// TestSessionInUseStays: a session used more often than its idle timeout,
// for several times that timeout, is never swept: idleness counts from its
// last use, not from its creation.
func TestSessionInUseStays(t *testing.T) {
	t.Parallel()
	for _, another := range []bool{false, true} {
		t.Run("another process sweeps="+strconv.FormatBool(another), func(t *testing.T) {
			// Not parallel: parallel subtests queue behind every test not
			// yet started, and would run last, at the tail of the package.
			m, sweep := sweepers(t, 2*time.Second, another)
			mustExec(t, m, "k", "n = 0\nx = 41")
			sweep()
			id := usedNow(t, m, "n = 0\nx = 41")
			for i := 1; i <= 14; i++ { // 7 s, three and a half idle timeouts
				time.Sleep(500 * time.Millisecond)
				res := mustExec(t, m, "k", "n += 1\nn")
				if res.StateLost || plain(res) != strconv.Itoa(i) {
					t.Fatalf("use %d, %.1f s after creation: n = %s, StateLost %v (%s): the session in use was swept",
						i, float64(i)/2, plain(res), res.StateLost, res.RestartReason)
				}
			}
			if got := containerOf(t, m, "k"); got != id {
				t.Fatalf("container %s replaced by %s", id, got)
			}
		})
	}
}

// TestBusySessionIsNotSwept: an execution that runs several times longer
// than the idle timeout is never cut short by the sweep, and its session
// (state and container) stays.
func TestBusySessionIsNotSwept(t *testing.T) {
	t.Parallel()
	for _, another := range []bool{false, true} {
		t.Run("another process sweeps="+strconv.FormatBool(another), func(t *testing.T) {
			// Not parallel: parallel subtests queue behind every test not
			// yet started, and would run last, at the tail of the package.
			m, sweep := sweepers(t, 2*time.Second, another)
			mustExec(t, m, "k", "x = 41")
			sweep()
			id := usedNow(t, m, "x = 41")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := m.Exec(ctx, "k", "import time\ntime.sleep(8)\nx += 1\nx")
			if err != nil {
				t.Fatalf("an 8 s execution under a 2 s idle timeout: %v", err)
			}
			if res.Error != nil || res.StateLost || plain(res) != "42" {
				t.Fatalf("an 8 s execution under a 2 s idle timeout: %q, error %+v, StateLost %v (%s)", plain(res), res.Error, res.StateLost, res.RestartReason)
			}
			if got := containerOf(t, m, "k"); got != id {
				t.Fatalf("container %s replaced by %s", id, got)
			}
		})
	}
}

// TestCommandSessionIsNotSwept: a shell command, in the foreground or in
// the background, that runs several times longer than the idle timeout
// keeps its session, whichever manager sweeps: another process cannot see
// this one's commands in memory, so it asks the container. Once the
// command is over the session idles out as any other.
func TestCommandSessionIsNotSwept(t *testing.T) {
	t.Parallel()
	for _, another := range []bool{false, true} {
		for _, background := range []bool{false, true} {
			name := "another process sweeps=" + strconv.FormatBool(another) + "/background=" + strconv.FormatBool(background)
			t.Run(name, func(t *testing.T) {
				// Not parallel: parallel subtests queue behind every test not
				// yet started, and would run last, at the tail of the package.
				m, sweep := sweepers(t, 2*time.Second, another)
				mustExec(t, m, "k", "x = 41")
				sweep()
				id := usedNow(t, m, "x = 41")
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := session.Command{Line: "sleep 8; echo done", Timeout: time.Minute}
				var out string
				if background {
					cid, err := m.StartCommand(ctx, "k", cmd)
					if err != nil {
						t.Fatal(err)
					}
					st, err := m.WaitCommand(ctx, "k", cid)
					if err != nil || st.Err != nil || st.Result == nil {
						t.Fatalf("an 8 s background command under a 2 s idle timeout: %v %+v", err, st)
					}
					out = st.Result.Stdout
				} else {
					res, err := m.Run(ctx, "k", cmd)
					if err != nil {
						t.Fatalf("an 8 s command under a 2 s idle timeout: %v", err)
					}
					out = res.Stdout
				}
				if out != "done\n" {
					t.Fatalf("command output %q", out)
				}
				// The execution first, at once: from the command's end the
				// session idles like any other, and on a loaded machine the
				// engine's list (containerOf) can take longer than the idle
				// timeout, after which the session is rightly swept.
				res := mustExec(t, m, "k", "x + 1")
				if res.StateLost || plain(res) != "42" {
					t.Fatalf("after the command: %q, StateLost %v (%s)", plain(res), res.StateLost, res.RestartReason)
				}
				if got := containerOf(t, m, "k"); got != id {
					t.Fatalf("container %s replaced by %s while a command ran", id, got)
				}
			})
		}
	}
}

// TestSlowStartIsNotSwept: a session whose kernel takes longer than the
// idle timeout to answer (a loaded host) is not evicted by another
// process's sweep while it starts: no process has recorded it yet, and its
// idle time does not begin before it could be used. Before, the sweep
// counted from the container's creation (in whole seconds, as the engine
// lists it) and removed it under the opening call: "session lost".
func TestSlowStartIsNotSwept(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = time.Second })
	ns := namespace()
	managerFor(t, cfg, ns, session.WithSweepInterval(100*time.Millisecond))
	d, cs := engineDriver(t)
	slow := managerFor(t, cfg, ns, session.WithDriver(slowBridge{Driver: d, cs: cs, delay: 4 * time.Second}), session.WithSweepInterval(time.Hour))
	res, err := slow.Exec(ctxMinute(t), "k", "x = 41\nx + 1")
	if err != nil {
		t.Fatalf("a session whose kernel answered after 4 s, under a 1 s idle timeout: %v", err)
	}
	if res.StateLost || plain(res) != "42" {
		t.Fatalf("a session whose kernel answered after 4 s: %q, StateLost %v (%s)", plain(res), res.StateLost, res.RestartReason)
	}
}
