package session_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// TestEngineRestart restarts the Docker engine under a live session. It
// disturbs every container on the machine, so it runs only when
// AGENTBOX_TEST_ENGINE_RESTART names the command that restarts the engine
// (.ci/run runs it on its own, after make test).
func TestEngineRestart(t *testing.T) {
	restart := os.Getenv("AGENTBOX_TEST_ENGINE_RESTART")
	if restart == "" {
		t.Skip("restarts the engine: set AGENTBOX_TEST_ENGINE_RESTART=$PWD/.ci/restart-docker to run it")
	}
	m := newManager(t, nil)
	mustExec(t, m, "r", "x = 1\nopen('/session/f', 'w').write('f')")
	out, err := exec.Command("sh", "-c", restart).CombinedOutput()
	if err != nil {
		t.Fatalf("restart the engine: %v\n%s", err, out)
	}
	if _, err := dockertest.Engine(t).Info(context.Background()); err != nil {
		t.Fatalf("engine after restart: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := m.Exec(ctx, "r", "x")
	switch {
	case err == nil:
		// The engine kept its containers running (live restore): the
		// session reconnected with its state.
		t.Log("the engine kept the container: reconnected with state")
		if plain(res) != "1" {
			t.Fatalf("after a live-restore restart: %+v", res)
		}
	case errors.Is(err, session.ErrSessionLost):
		// The engine stopped its containers: the loss is reported once,
		// then the key works again with a fresh session.
		t.Logf("reported once: %v", err)
		res := mustExec(t, m, "r", "'x' in globals()")
		if plain(res) != "False" {
			t.Fatalf("after the session was lost: %+v", res)
		}
	default:
		t.Fatalf("exec after an engine restart: %v", err)
	}
}
