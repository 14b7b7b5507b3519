package opensandbox_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
)

// TestLifecycleRacesEngine is TestLifecycleRaces on the engine, whose
// refusals are its own ("is already paused", "No such container"): a
// sandbox killed or removed at the engine, and concurrent pauses,
// resumes and deletes of one sandbox, answer 2xx, 404 or 409 naming the
// sandbox, never a 500.
func TestLifecycleRacesEngine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, nil)
	cli := dockertest.Engine(t)
	a, err := e.keys.Lookup(keyA)
	if err != nil {
		t.Fatal(err)
	}
	containerOf := func(id string) string {
		t.Helper()
		in, err := e.m.Info(context.Background(), a.SessionKey(id))
		if err != nil {
			t.Fatal(err)
		}
		return in.ContainerID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	check := func(what, id string, r response, want ...int) {
		t.Helper()
		for _, w := range want {
			if r.status == w {
				if r.status >= 400 {
					if _, msg := r.apiError(t); !strings.Contains(msg, id) {
						t.Errorf("%s: message %q does not name sandbox %s", what, msg, id)
					}
				}
				return
			}
		}
		t.Errorf("%s: status %d %s, want one of %v", what, r.status, r.body, want)
	}

	// Killed at the engine: the container stays, stopped.
	killed := e.create(nil).ID
	if err := cli.KillContainer(ctx, containerOf(killed), "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	check("pause a killed sandbox", killed, e.do("POST", "/v1/sandboxes/"+killed+"/pause", nil, nil), http.StatusConflict)
	check("resume a killed sandbox", killed, e.do("POST", "/v1/sandboxes/"+killed+"/resume", nil, nil), http.StatusConflict)

	// Removed at the engine.
	removed := e.create(nil).ID
	if err := cli.RemoveContainer(ctx, containerOf(removed)); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"pause", "resume"} {
		check(op+" a removed sandbox", removed, e.do("POST", "/v1/sandboxes/"+removed+"/"+op, nil, nil), http.StatusNotFound)
	}
	// get says Failed (lost): delete agrees that there is a sandbox.
	check("delete a removed sandbox", removed, e.do("DELETE", "/v1/sandboxes/"+removed, nil, nil), http.StatusNoContent)

	// Pauses, resumes and deletes of one sandbox at once, a few times: a
	// container frozen while the engine kills it is the rare case.
	for range 4 {
		busy := e.create(nil).ID
		var wg sync.WaitGroup
		for _, op := range []string{"pause", "delete", "pause", "resume", "delete", "pause", "delete", "resume"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if op == "delete" {
					check("concurrent delete", busy, e.do("DELETE", "/v1/sandboxes/"+busy, nil, nil), http.StatusNoContent, http.StatusNotFound)
					return
				}
				check("concurrent "+op, busy, e.do("POST", "/v1/sandboxes/"+busy+"/"+op, nil, nil), http.StatusAccepted, http.StatusNotFound, http.StatusConflict)
			}()
		}
		wg.Wait()
	}
}
