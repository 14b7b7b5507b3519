package session_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
)

// The kernel worker talks to the init over two pipes (requests on fd 3,
// replies on fd 4) in the very process that runs user code. These tests are
// what that code can do to them: steal a request, forge a reply, fork a
// second kernel. Each time the session must go on within its deadlines and
// tell the truth about its state.

// TestCodeCannotWedgeTheKernelByStealingRequests: a thread that reads the
// worker's request pipe takes the next request from under the kernel (in
// BIND mode the state inspection that follows every execution). The init's
// deadlines must end that request, so the next execution finishes within its
// own timeout and grace, and the one after works; a restart is reported.
func TestCodeCannotWedgeTheKernelByStealingRequests(t *testing.T) {
	t.Parallel()
	const grace = 2 * time.Second
	m := newManager(t, func(c *config.Config) {
		c.SessionStorage = config.StorageBind
		c.InterruptGrace = grace
	})
	key := "stealer"
	mustExec(t, m, key, "kept = 41")
	mustExec(t, m, key, `
import os, threading
def steal():
    while True:
        try:
            os.read(3, 1 << 16)
        except OSError:
            return
threading.Thread(target=steal, daemon=True).start()`)
	// The inspection after the cell above may be stolen, then this
	// execution's request: either way it ends by its timeout and grace.
	const timeout = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	res, err := m.Exec(ctx, key, "kept + 1", session.Timeout(timeout))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("exec after a thread stole the kernel's requests: %v (after %s)", err, took)
	}
	// The inspection's deadline and grace, then this one's: generous for a
	// loaded machine, far below the wedge (minutes).
	if bound := 2*(timeout+grace) + 20*time.Second; took > bound {
		t.Fatalf("execution took %s, more than %s: a stolen request held the kernel", took, bound)
	}
	if plain(res) != "42" && !(res.KernelRestarted && res.StateLost) {
		t.Fatalf("result neither ran nor reported the lost state: %+v", res)
	}
	next := mustExec(t, m, key, "after = 1\nafter + 1", session.Timeout(timeout))
	if plain(next) != "2" {
		t.Fatalf("the execution after: %+v", next)
	}
}

// TestForgedKernelFramesAreNotResults: frames that user code writes into the
// worker's reply pipe (a display, then a done that would end the execution
// early) never become the execution's recorded result: the init tells them
// from the kernel's own replies, restarts the kernel and says so.
func TestForgedKernelFramesAreNotResults(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	key := "forger"
	mustExec(t, m, key, "kept = 41")
	res := mustExec(t, m, key, `
import json, os, time
forged = [
    {"type": "display", "id": "x", "kind": "display_data", "data": {"text/plain": "FORGED"}},
    {"type": "done", "id": "x", "error": None},
]
os.write(4, "".join(json.dumps(f) + "\n" for f in forged).encode())
time.sleep(1)
print("real end")`)
	for _, o := range res.Outputs {
		if strings.Contains(o.Data["text/plain"], "FORGED") {
			t.Fatalf("a forged display became a result: %+v", res.Outputs)
		}
	}
	if !strings.Contains(res.Stdout, "real end") && !(res.KernelRestarted && res.StateLost && res.Error != nil) {
		t.Fatalf("a forged done ended the execution as its result: %+v", res)
	}
	if res.KernelRestarted && !strings.Contains(res.RestartReason, "forged") {
		t.Errorf("restart reason %q does not name the forged frame", res.RestartReason)
	}
	// Frames that are no JSON object at all are forgeries too, and must not
	// take the init down with the container.
	id := containerOf(t, m, key)
	res = mustExec(t, m, key, `
import os, time
os.write(4, b'[1]\n"text"\nnot json\n')
time.sleep(1)
print("real end")`)
	if !strings.Contains(res.Stdout, "real end") && !(res.KernelRestarted && res.StateLost) {
		t.Fatalf("after frames that are no JSON object: %+v", res)
	}
	if got := containerOf(t, m, key); got != id {
		t.Fatalf("container %s replaced by %s: a malformed frame ended the init", id, got)
	}
	// Code that digs the nonce out of the kernel can forge its own result
	// (README, Security), but a malformed frame must still not end PID 1.
	res = mustExec(t, m, key, `
import json, os, time
n = display.__self__.ch.nonce
os.write(4, (json.dumps({"type": "display", "kind": "display_data", "data": [1], "n": n}) + "\n").encode())
time.sleep(1)
print("real end")`)
	if !strings.Contains(res.Stdout, "real end") && !(res.KernelRestarted && res.StateLost) {
		t.Fatalf("after a malformed frame with the nonce: %+v", res)
	}
	if got := containerOf(t, m, key); got != id {
		t.Fatalf("container %s replaced by %s: a malformed frame with the nonce ended the init", id, got)
	}
	// Written between executions (a background thread) they are no result
	// either, and the next execution tells whether state survived.
	mustExec(t, m, key, `
import json, os, threading, time
kept = 41
def later():
    time.sleep(0.5)
    os.write(4, (json.dumps({"type": "done", "id": "x", "error": None}) + "\n").encode())
threading.Thread(target=later, daemon=True).start()`)
	time.Sleep(time.Second)
	res = mustExec(t, m, key, "kept + 1")
	if plain(res) != "42" && !(res.KernelRestarted && res.StateLost) {
		t.Fatalf("after a forged frame between executions: %+v", res)
	}
	if plain(res) == "42" && res.KernelRestarted {
		t.Fatalf("state kept but a restart reported: %+v", res)
	}
}

// TestForkedKernelDoesNotServe: code that forks leaves a child that returns
// from the cell into the kernel's loop. It must not become a second kernel
// reading requests (executions would alternate between two namespaces while
// the results say nothing was lost): the child exits there.
func TestForkedKernelDoesNotServe(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	key := "forker"
	mustExec(t, m, key, "import os\nparent = os.getpid()\nn = 0")
	res := mustExec(t, m, key, "child = os.fork()\nn += 1")
	if res.Error != nil {
		t.Fatalf("fork: %+v", res.Error)
	}
	for i := 2; i < 10; i++ {
		res := mustExec(t, m, key, "n += 1\n(os.getpid() == parent, n)")
		want := "(True, " + strconv.Itoa(i) + ")"
		if got := plain(res); got != want {
			t.Fatalf("execution %d: got %s (state_lost %v), want %s: a forked child served it? %+v", i, got, res.StateLost, want, res)
		}
	}
	// A child that never returns to the loop cannot reach the kernel's
	// pipes either (it could take the next request, or answer it): what
	// it finds on their numbers is /dev/null.
	res = mustExec(t, m, key, `
import stat, time
if os.fork() == 0:
    found = [stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (3, 4)]
    open("/session/child.txt", "w").write(repr(found))
    os._exit(0)
for _ in range(500):
    if os.path.exists("/session/child.txt"):
        break
    time.sleep(0.01)
time.sleep(0.1)
print(open("/session/child.txt").read())`)
	if res.Error != nil || strings.TrimSpace(res.Stdout) != "[False, False]" {
		t.Fatalf("a forked child's view of the kernel's pipes (are they pipes?): %q %+v", res.Stdout, res.Error)
	}
}

// TestBackgroundDisplayIsNotAForgery: display() from a thread of the code
// after its cell ended is the kernel's own frame (with the last request's
// nonce): it is dropped as before, never taken for a forgery that costs the
// session its state.
func TestBackgroundDisplayIsNotAForgery(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	key := "late display"
	mustExec(t, m, key, `
import threading, time
kept = 41
def later():
    time.sleep(0.3)
    display("late")
    open("/session/shown", "w").close()
threading.Thread(target=later, daemon=True).start()`)
	// Between two executions (the file API does not go through the
	// kernel): the display has gone out while no request was at hand.
	// A kernel killed for its display never writes the file: the wait ends
	// and the execution below says so.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if _, err := m.StatFile(ctx, key, "/session/shown"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res := mustExec(t, m, key, "kept + 1")
	if plain(res) != "42" || res.KernelRestarted {
		t.Fatalf("after a background display() between executions: %+v (restart reason %q)", res, res.RestartReason)
	}
}

// TestDisplayFromThreads: large display() frames from two threads at once
// reach the init whole (one frame at a time on the pipe), so none is taken
// for a malformed forgery and the kernel keeps its state.
func TestDisplayFromThreads(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	key := "threads"
	res := mustExec(t, m, key, `
import threading
kept = 41
class Big:
    def __init__(self, c):
        self.c = c
    def _repr_html_(self):
        return self.c * (100 << 10)
def show(c):
    for _ in range(20):
        display(Big(c))
ts = [threading.Thread(target=show, args=(c,)) for c in "ab"]
for t in ts:
    t.start()
for t in ts:
    t.join()`)
	if res.Error != nil || res.KernelRestarted || len(res.Outputs) != 40 {
		t.Fatalf("two threads displaying: %d outputs, error %+v, restarted %v (%s)", len(res.Outputs), res.Error, res.KernelRestarted, res.RestartReason)
	}
	if res := mustExec(t, m, key, "kept + 1"); plain(res) != "42" {
		t.Fatalf("after two threads displayed: %+v", res)
	}
}
