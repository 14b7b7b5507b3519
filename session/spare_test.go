package session_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
)

// A channel keeps one spare supervisor, started ahead, so that a command
// does not wait for the init's fork. These tests hold what that must not
// change: the spare is what runs the next command, it counts as no running
// command, and a command handed to the spare of a frozen container never
// runs once it is thawed.

// spares is Python that lists the container's spare supervisors
// (processes named agentbox-spare, but for a spare's launcher in the
// moment after its fork, before it names itself).
const spares = `
import os, time
def spares():
    named = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit(): continue
        try:
            with open("/proc/%s/stat" % pid, "rb") as f:
                stat = f.read()
        except OSError: continue
        if b"(agentbox-spare)" in stat:
            named[int(pid)] = int(stat[stat.rindex(b")") + 2:].split()[1])
    return sorted(pid for pid, ppid in named.items() if ppid not in named)
def wait_spare():
    deadline = time.time() + 30
    while not spares() and time.time() < deadline: time.sleep(0.02)
    return spares()
`

// TestCommandRunsOnTheSpare: the second command's supervisor is the spare
// started after the first, and a waiting spare is no running command to
// the sweep. Red with no spare kept.
func TestCommandRunsOnTheSpare(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if res, err := m.Run(ctx, "k", session.Command{Line: "true"}); err != nil || res.ExitCode != 0 {
		t.Fatal(res, err)
	}
	got := stdout(mustExec(t, m, "k", spares+"print(wait_spare())"))
	if got == "[]" || strings.Contains(got, ",") {
		t.Fatalf("spare supervisors after a command: %s, want one", got)
	}
	if n, err := session.CommandsRunning(ctx, m, containerOf(t, m, "k")); err != nil || n != 0 {
		t.Errorf("commands running with only a spare waiting: %d, %v; want 0", n, err)
	}
	// bash -c is the supervisor's child.
	res, err := m.Run(ctx, "k", session.Command{Line: "echo $PPID"})
	if err != nil || res.ExitCode != 0 {
		t.Fatal(res, err)
	}
	sup, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("the supervisor's pid: %q (%s)", res.Stdout, res.Stderr)
	}
	if want := strings.Trim(got, "[]"); strconv.Itoa(sup) != want {
		t.Fatalf("the command ran under supervisor %d; the spare was %s", sup, want)
	}
}

// TestCommandSparePaused: a command handed to the spare of a frozen
// container is ErrPaused and never runs once the container is thawed. Red
// with the supervisor starting the command without the host's 'g'.
func TestCommandSparePaused(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if res, err := m.Run(ctx, "k", session.Command{Line: "true"}); err != nil || res.ExitCode != 0 {
		t.Fatal(res, err)
	}
	spare := stdout(mustExec(t, m, "k", spares+"print(wait_spare())"))
	if spare == "[]" {
		t.Fatal("no spare supervisor after a command")
	}
	id := containerOf(t, m, "k")
	dockerCLI(t, "pause", id)
	_, err := m.Run(ctx, "k", session.Command{Line: "touch /session/late"})
	if !errors.Is(err, session.ErrPaused) {
		t.Errorf("a command in a paused session: %v, want ErrPaused", err)
	}
	dockerCLI(t, "unpause", id)
	// The spare the host gave up on ends once thawed (its input ends);
	// whatever it was to do, it did by then.
	out := stdout(mustExec(t, m, "k", spares+`
old = `+spare+`
deadline = time.time() + 30
while set(old) & set(spares()) and time.time() < deadline: time.sleep(0.02)
print(sorted(set(old) & set(spares())), os.path.exists("/session/late"))`))
	if out != "[] False" {
		t.Fatalf("after the thaw: the old spare, /session/late: %s", out)
	}
}
