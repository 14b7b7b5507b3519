package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// waitInfo polls the session of key until ok accepts its Info, and
// returns it; it fails the test after a minute.
func waitInfo(t *testing.T, m *session.Manager, key, what string, ok func(session.Info) bool) session.Info {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		in, err := m.Info(context.Background(), key, session.WithoutMemoryUse())
		if err == nil && ok(in) {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: session %q never %s: last %+v (%v)", t.Name(), key, what, in, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pausedByIdle(in session.Info) bool {
	return in.State == session.StatePaused && in.PausedBy == session.PausedByIdle
}

// TestIdlePauseSweepDecisions (issue 24, idle sessions that pause): with
// IDLE_ACTION=pause the sweep pauses an idle session instead of removing
// it, and Info, List and the driver say so; its next Exec resumes it
// transparently with its state; paused by the sweep again, it is removed
// after IDLE_PAUSED_TIMEOUT_S and the next Exec says why its state is
// gone. Before, the sweep removed it at the first idle timeout.
func TestIdlePauseSweepDecisions(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.IdleTimeout = time.Second
	cfg.IdleAction = config.IdlePause
	cfg.IdlePausedTimeout = 3 * time.Second
	d := sessiontest.NewDriver()
	m := quietManager(t, cfg, d, session.WithSweepInterval(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.Exec(ctx, "k", "x = 41"); err != nil {
		t.Fatal(err)
	}
	in := waitInfo(t, m, "k", "paused by the idle sweep", pausedByIdle)
	if in.IdleAction != "pause" || in.Paused.IsZero() {
		t.Errorf("Info of an idle-paused session: %+v", in)
	}
	cs := d.Containers()
	if len(cs) != 1 || !cs[0].Paused {
		t.Fatalf("containers after the idle pause: %+v, want one, paused", cs)
	}
	list, err := m.List(ctx)
	if err != nil || len(list) != 1 || list[0].State != session.StatePaused || list[0].PausedBy != session.PausedByIdle {
		t.Errorf("List of an idle-paused session: %+v (%v)", list, err)
	}
	// The next call resumes it, state intact, in this process and in
	// another.
	res, err := m.Exec(ctx, "k", "x + 1")
	if err != nil || res.StateLost || plain(res) != "42" {
		t.Fatalf("exec after the idle pause: %v, %+v", err, res)
	}
	waitInfo(t, m, "k", "paused again", pausedByIdle)
	other := quietManager(t, cfg, d)
	if res, err = other.Exec(ctx, "k", "x + 2"); err != nil || res.StateLost || plain(res) != "43" {
		t.Fatalf("exec from another process after the idle pause: %v, %+v", err, res)
	}
	// Left paused past IDLE_PAUSED_TIMEOUT_S, it goes.
	in = waitInfo(t, m, "k", "removed after its paused timeout", func(in session.Info) bool { return in.State == session.StateStopped })
	if !strings.Contains(in.StopReason, "paused unused") {
		t.Errorf("stop reason %q, want it to say it was removed after its paused timeout", in.StopReason)
	}
	if n := len(d.Containers()); n != 0 {
		t.Errorf("%d containers after the paused timeout", n)
	}
	res, err = m.Exec(ctx, "k", "x = 1")
	if err != nil || !res.StateLost || !strings.Contains(res.RestartReason, "paused unused") {
		t.Errorf("exec after the removal: %v, state lost %v (%s)", err, res != nil && res.StateLost, res.RestartReason)
	}
}

// TestIdleActionPerSession: OnIdle chooses the idle action of one session
// whatever IDLE_ACTION says; a session a caller paused is never resumed by
// a call (ErrPaused) nor removed for being paused long; a bad action is
// refused.
func TestIdleActionPerSession(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.IdleTimeout = time.Second
	cfg.IdlePausedTimeout = time.Second // IDLE_ACTION stays stop
	d := sessiontest.NewDriver()
	m := quietManager(t, cfg, d, session.WithSweepInterval(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.Start(ctx, "bad", session.OnIdle("freeze")); !errors.Is(err, session.ErrInvalidOption) {
		t.Errorf("OnIdle(freeze): %v, want ErrInvalidOption", err)
	}
	if _, err := m.Exec(ctx, "user", "y = 1", session.CreateWith(session.OnIdle(config.IdlePause))); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(ctx, "user"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Exec(ctx, "stop", "z = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Exec(ctx, "pause", "x = 1", session.CreateWith(session.OnIdle(config.IdlePause))); err != nil {
		t.Fatal(err)
	}
	waitInfo(t, m, "stop", "removed (IDLE_ACTION=stop)", func(in session.Info) bool { return in.State == session.StateStopped })
	waitInfo(t, m, "pause", "paused by the idle sweep", pausedByIdle)
	// "pause" is removed a paused timeout after its pause: by then
	// "user", paused by a caller before, has been paused longer.
	waitInfo(t, m, "pause", "removed after its paused timeout", func(in session.Info) bool { return in.State == session.StateStopped })
	in := mustInfo(t, m, "user")
	if in.State != session.StatePaused || in.PausedBy != session.PausedByUser {
		t.Errorf("a session a caller paused: %+v, want paused by the user, kept", in)
	}
	if _, err := m.Exec(ctx, "user", "y"); !errors.Is(err, session.ErrPaused) {
		t.Errorf("exec on a session a caller paused: %v, want ErrPaused", err)
	}
}
