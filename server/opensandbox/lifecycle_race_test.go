package opensandbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// racingDriver runs a hook just before the Manager's pause, unpause or
// remove reaches the (in-memory) engine: what another client, or someone
// at the engine, did in between.
type racingDriver struct {
	*sessiontest.Driver
	mu                         sync.Mutex
	beforePause, beforeUnpause func(id string)
}

func (d *racingDriver) hook(p *func(string)) func(string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := *p
	*p = nil // once
	return f
}

// set installs the hooks (nil: none).
func (d *racingDriver) set(pause, unpause func(id string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.beforePause, d.beforeUnpause = pause, unpause
}

func (d *racingDriver) Pause(ctx context.Context, id string) error {
	if f := d.hook(&d.beforePause); f != nil {
		f(id)
	}
	return d.Driver.Pause(ctx, id)
}

func (d *racingDriver) Unpause(ctx context.Context, id string) error {
	if f := d.hook(&d.beforeUnpause); f != nil {
		f(id)
	}
	return d.Driver.Unpause(ctx, id)
}

// TestLifecycleRaces: pause, resume and delete of a sandbox whose
// container another client or the engine's user changed meanwhile answer
// what happened (202, 404, 409) with a message naming the sandbox id the
// caller knows (never the session key), never a 500. Before, a container
// removed or stopped under a pause or resume answered 500 ("No such
// container", "already paused" on the engine).
func TestLifecycleRaces(t *testing.T) {
	drv := &racingDriver{Driver: sessiontest.NewDriver()}
	e := newFakeEnv(t, drv)
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
	cases := []struct {
		name    string
		setup   func(id, container string) // before the calls
		calls   []string                   // "pause", "resume", "delete" in turn
		want    []int
		mention bool // the error names the sandbox
	}{
		{"pause twice, resume twice", nil, []string{"pause", "pause", "resume", "resume"}, []int{202, 202, 202, 202}, false},
		{"killed from outside", func(_, c string) { drv.Kill(c) }, []string{"pause", "resume", "delete"}, []int{409, 409, 204}, true},
		// get says Failed (lost): delete answers 204, as for a killed one.
		{"removed from outside", func(_, c string) { drv.RemoveBehindBack(c) }, []string{"pause", "resume", "delete"}, []int{404, 404, 204}, true},
		{"removed while pausing", func(string, string) { drv.set(drv.RemoveBehindBack, nil) }, []string{"pause"}, []int{404}, true},
		{"killed while pausing", func(string, string) { drv.set(drv.Kill, nil) }, []string{"pause"}, []int{409}, true},
		{"paused by another while pausing", func(string, string) {
			drv.set(func(c string) { _ = drv.Driver.Pause(context.Background(), c) }, nil)
		}, []string{"pause"}, []int{202}, false},
		{"removed while resuming", func(id, _ string) {
			e.do("POST", "/v1/sandboxes/"+id+"/pause", nil, nil)
			drv.set(nil, drv.RemoveBehindBack)
		}, []string{"resume"}, []int{404}, true},
		{"killed while resuming", func(id, _ string) {
			e.do("POST", "/v1/sandboxes/"+id+"/pause", nil, nil)
			drv.set(nil, drv.Kill)
		}, []string{"resume"}, []int{409}, true},
		{"resumed by another while resuming", func(id, _ string) {
			e.do("POST", "/v1/sandboxes/"+id+"/pause", nil, nil)
			drv.set(nil, func(c string) { _ = drv.Driver.Unpause(context.Background(), c) })
		}, []string{"resume"}, []int{202}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := e.create(nil).ID
			if tc.setup != nil {
				tc.setup(id, containerOf(id))
			}
			for i, call := range tc.calls {
				method, path := "POST", "/v1/sandboxes/"+id+"/"+call
				if call == "delete" {
					method, path = "DELETE", "/v1/sandboxes/"+id
				}
				r := e.do(method, path, nil, nil)
				if r.status != tc.want[i] {
					t.Errorf("%s #%d: status %d %s, want %d", call, i+1, r.status, r.body, tc.want[i])
					continue
				}
				if r.status < 400 {
					continue
				}
				_, msg := r.apiError(t)
				if tc.mention && !strings.Contains(msg, id) {
					t.Errorf("%s: message %q does not name sandbox %s", call, msg, id)
				}
				if strings.Contains(msg, a.SessionKey(id)) || strings.Contains(msg, session.ID(a.SessionKey(id))) {
					t.Errorf("%s: message %q names the internal session", call, msg)
				}
			}
		})
	}
}
