package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// TestIdlePauseEngine (issue 24, idle sessions that pause): on the engine,
// with IDLE_ACTION=pause, the sweep freezes an idle session (the engine
// says paused), a variable set before survives the transparent resume on
// the next Exec, and the session, paused again, is removed after
// IDLE_PAUSED_TIMEOUT_S.
func TestIdlePauseEngine(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) {
		c.IdleTimeout = 2 * time.Second
		c.IdleAction = config.IdlePause
		c.IdlePausedTimeout = 5 * time.Second // room for a loaded host between the pause and the next Exec
	})
	m := managerFor(t, cfg, namespace(), session.WithSweepInterval(200*time.Millisecond))
	mustExec(t, m, "k", "x = 41")
	id := containerOf(t, m, "k")
	waitInfo(t, m, "k", "paused by the idle sweep", pausedByIdle)
	cli := dockertest.Engine(t)
	ctx := ctxMinute(t)
	if st, err := cli.InspectContainer(ctx, id); err != nil || !st.Paused {
		t.Fatalf("the engine says paused=%v (%v)", st.Paused, err)
	}
	res := mustExec(t, m, "k", "x + 1")
	if res.StateLost || plain(res) != "42" {
		t.Fatalf("after the transparent resume: %q, state lost %v (%s)", plain(res), res.StateLost, res.RestartReason)
	}
	if st, err := cli.InspectContainer(ctx, id); err != nil || st.Paused {
		t.Errorf("after the next Exec the engine says paused=%v (%v)", st.Paused, err)
	}
	waitInfo(t, m, "k", "paused again", pausedByIdle)
	in := waitInfo(t, m, "k", "removed after its paused timeout", func(in session.Info) bool { return in.State == session.StateStopped })
	if !strings.Contains(in.StopReason, "paused unused") {
		t.Errorf("stop reason %q", in.StopReason)
	}
	if _, err := cli.InspectContainer(ctx, id); err == nil {
		t.Error("the container is still in the engine after the paused timeout")
	}
}
