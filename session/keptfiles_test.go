package session_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
)

// The files API's calls run on files tools a channel keeps between calls
// (agentbox_fileops.serve): a call costs no fork in the container. These
// tests hold what keeping them must not change: a kept tool is used again,
// one that sandbox code killed is replaced without the call failing, and a
// call on a frozen container never runs once it is thawed.

// filesTools is Python that lists the container's files tools: pid ->
// name, as the sandbox user sees them in /proc.
const filesTools = `
import os, time
def files_tools():
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit(): continue
        try:
            with open("/proc/%s/comm" % pid) as f:
                if f.read().strip() == "agentbox-files": found.append(int(pid))
        except OSError: continue
    return sorted(found)
`

// TestFilesToolKept: calls one after another run on the same files tool.
// Red with the tool let go after each call (a fork per call again).
func TestFilesToolKept(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	calls := func() {
		t.Helper()
		if _, err := m.WriteFile(ctx, "k", "/session/a.txt", strings.NewReader("hello"), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := m.StatFile(ctx, "k", "/session/a.txt"); err != nil {
			t.Fatal(err)
		}
		r, err := m.ReadFile(ctx, "k", "/session/a.txt", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(r); err != nil || string(b) != "hello" {
			t.Fatalf("read %q, %v", b, err)
		}
		r.Close()
		if _, err := m.ListFiles(ctx, "k", "/session", session.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := m.MakeDir(ctx, "k", "/session/d", 0); err != nil {
			t.Fatal(err)
		}
	}
	calls()
	before := stdout(mustExec(t, m, "k", filesTools+"print(files_tools())"))
	calls()
	after := stdout(mustExec(t, m, "k", filesTools+"print(files_tools())"))
	if before != after || before == "[]" || strings.Contains(before, ",") {
		t.Fatalf("files tools before %s, after five more calls %s: want the same one", before, after)
	}
}

// TestFilesToolKilledBetweenCalls: sandbox code may kill the idle files
// tools (they run as its user); the next calls find new ones. Red with a
// dead kept tool's failure returned to the caller.
func TestFilesToolKilledBetweenCalls(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.WriteFile(ctx, "k", "/session/a.txt", strings.NewReader("a"), 0); err != nil {
		t.Fatal(err)
	}
	// Several kept at once: reads open together.
	var wg sync.WaitGroup
	var readers []*session.FileReader
	var mu sync.Mutex
	for range 3 {
		wg.Go(func() {
			r, err := m.ReadFile(ctx, "k", "/session/a.txt", 0, -1)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			readers = append(readers, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, r := range readers {
		io.Copy(io.Discard, r)
		r.Close()
	}
	out := stdout(mustExec(t, m, "k", filesTools+`
import signal
killed = files_tools()
for pid in killed: os.kill(pid, signal.SIGKILL)
deadline = time.time() + 30
while files_tools() and time.time() < deadline: time.sleep(0.02)
print(len(killed), files_tools())`))
	if out == "0 []" || !strings.HasSuffix(out, " []") {
		t.Fatalf("killed files tools: %s", out)
	}
	for i := range 3 {
		p := fmt.Sprintf("/session/b%d.txt", i)
		if _, err := m.WriteFile(ctx, "k", p, strings.NewReader("b"), 0); err != nil {
			t.Fatalf("write after the files tools were killed (%s): %v", out, err)
		}
		if _, err := m.StatFile(ctx, "k", p); err != nil {
			t.Fatalf("stat after the files tools were killed: %v", err)
		}
	}
}

// TestFilesToolStoppedBetweenCalls: sandbox code may stop the idle files
// tools (SIGSTOP); the next calls are taken by new ones, soon, and a
// change is made once. Red with no bound on an idle tool's answer (the
// calls wait for the caller's deadline).
func TestFilesToolStoppedBetweenCalls(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.WriteFile(ctx, "k", "/session/a.txt", strings.NewReader("a"), 0); err != nil {
		t.Fatal(err)
	}
	out := stdout(mustExec(t, m, "k", filesTools+`
import signal
stopped = files_tools()
for pid in stopped: os.kill(pid, signal.SIGSTOP)
print(stopped)`))
	if out == "[]" {
		t.Fatal("no idle files tool to stop")
	}
	call, cancelCall := context.WithTimeout(ctx, 30*time.Second)
	defer cancelCall()
	if err := m.MakeDir(call, "k", "/session/d", 0); err != nil {
		t.Fatalf("mkdir with the idle files tool stopped (%s): %v", out, err)
	}
	if _, err := m.StatFile(call, "k", "/session/d"); err != nil {
		t.Fatalf("stat with the idle files tool stopped: %v", err)
	}
	if err := m.MoveFile(call, "k", "/session/a.txt", "/session/b.txt", false); err != nil {
		t.Fatalf("a move after the stopped tool was let go: %v", err)
	}
}

// TestFilesPausedKeptTool: a call that changes something, handed to an
// idle files tool of a frozen container, is ErrPaused and never runs once
// the container is thawed. Red with the tool running a call without the
// host's confirmation.
func TestFilesPausedKeptTool(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.WriteFile(ctx, "k", "/session/a.txt", strings.NewReader("a"), 0); err != nil {
		t.Fatal(err)
	}
	kept := stdout(mustExec(t, m, "k", filesTools+"print(files_tools())"))
	if kept == "[]" || strings.Contains(kept, ",") {
		t.Fatalf("files tools after a call: %s, want one kept", kept)
	}
	id := containerOf(t, m, "k")
	dockerCLI(t, "pause", id)
	err := m.MakeDir(ctx, "k", "/session/late", 0)
	if !errors.Is(err, session.ErrPaused) {
		t.Errorf("mkdir in a paused session: %v, want ErrPaused", err)
	}
	_, err = m.WriteFile(ctx, "k", "/session/late.txt", strings.NewReader("x"), 0)
	if !errors.Is(err, session.ErrPaused) {
		t.Errorf("write in a paused session: %v, want ErrPaused", err)
	}
	dockerCLI(t, "unpause", id)
	// The channel's frames are taken in order: once this call is
	// answered, the init has handed over (and let go of) every tool the
	// calls above left.
	if _, err := m.StatFile(ctx, "k", "/session"); err != nil {
		t.Fatal(err)
	}
	// The tools the host gave up on end once thawed (their input
	// ends), the stat's stays; whatever the others were to do, they did
	// by then.
	out := stdout(mustExec(t, m, "k", filesTools+`
kept = `+kept+`
deadline = time.time() + 30
while (set(kept) & set(files_tools()) or len(files_tools()) > 1) and time.time() < deadline: time.sleep(0.02)
print(sorted(set(kept) & set(files_tools())), len(files_tools()), os.path.exists("/session/late"), os.path.exists("/session/late.txt"))`))
	if out != "[] 1 False False" {
		t.Fatalf("after the thaw: the kept tool, tools left, /session/late, /session/late.txt: %s", out)
	}
}

func stdout(res *session.Result) string { return strings.TrimSpace(res.Stdout) }

// TestFilesToolReadsTheCallLate: an idle files tool that reads a change
// after the call's window (sandbox code stopped it for longer) refuses
// it and stays; the host asks it again the long way, with a confirmation,
// and the change is made once, on the same tool. Red with a refusal taken
// for a failed call, or for a tool gone.
func TestFilesToolReadsTheCallLate(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.WriteFile(ctx, "k", "/session/a.txt", strings.NewReader("a"), 0); err != nil {
		t.Fatal(err)
	}
	// Stopped for 1.5 s: past the window (1 s), inside the stall (2 s).
	kept := stdout(mustExec(t, m, "k", filesTools+`
import signal, threading
kept = files_tools()
for pid in kept: os.kill(pid, signal.SIGSTOP)
def wake():
    time.sleep(1.5)
    for pid in kept: os.kill(pid, signal.SIGCONT)
threading.Thread(target=wake, daemon=True).start()
print(kept)`))
	if kept == "[]" || strings.Contains(kept, ",") {
		t.Fatalf("files tools after a call: %s, want one kept", kept)
	}
	if _, err := m.WriteFile(ctx, "k", "/session/a.txt", strings.NewReader("late"), 0); err != nil {
		t.Fatalf("a write the idle tool read late: %v", err)
	}
	out := stdout(mustExec(t, m, "k", filesTools+`print(files_tools(), open("/session/a.txt").read())`))
	if out != kept+" late" {
		t.Fatalf("after the late write: files tools, /session/a.txt: %s, want %s late", out, kept)
	}
}

// TestWriteAllRefusedInTheSandbox: an all-or-nothing write small enough to
// go whole, with its commit, to the files tool, one of whose files the
// sandbox refuses (its folder is a file): nothing is put in place, and
// every other file's result says it was not written, for that file's
// error. Red with a commit that was not made taken for one that was.
func TestWriteAllRefusedInTheSandbox(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.WriteFile(ctx, "k", "/session/kept.txt", strings.NewReader("k"), 0); err != nil {
		t.Fatal(err)
	}
	files := []session.FileWrite{
		{Path: "/session/first.txt", Data: strings.NewReader("first")},
		{Path: "/session/kept.txt/under", Data: strings.NewReader("under")},
		{Path: "/session/last.txt", Data: strings.NewReader("last")},
	}
	results, err := m.WriteFileSeqAll(ctx, "k", slices.Values(files), nil)
	if err != nil {
		t.Fatal(err)
	}
	if results[1].Err == nil || errors.Is(results[1].Err, session.ErrNotWritten) {
		t.Fatalf("the refused file's result: %v, want the sandbox's refusal", results[1].Err)
	}
	for _, i := range []int{0, 2} {
		if !errors.Is(results[i].Err, session.ErrNotWritten) || results[i].Size != 0 {
			t.Errorf("%s: size %d, %v; want not written", results[i].Path, results[i].Size, results[i].Err)
		}
	}
	out := stdout(mustExec(t, m, "k", `import os; print(sorted(os.listdir("/session")))`))
	if strings.Contains(out, "first.txt") || strings.Contains(out, "last.txt") {
		t.Fatalf("/session after a refused call: %s", out)
	}
}

// TestFilesLargeWriteKeepsItsTool: a write too large to go whole with its
// call streams its files after it, on the idle kept tool, which answers
// only once a file has come: the host must not wait for an answer before
// sending them. Red when it does: the tool is taken for stalled after two
// seconds, and a new one writes the file.
func TestFilesLargeWriteKeepsItsTool(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.WriteFile(ctx, "k", "/session/a.txt", strings.NewReader("a"), 0); err != nil {
		t.Fatal(err)
	}
	kept := stdout(mustExec(t, m, "k", filesTools+`print(files_tools())`))
	big := strings.Repeat("x", 1<<20)
	if _, err := m.WriteFile(ctx, "k", "/session/big.txt", strings.NewReader(big), 0); err != nil {
		t.Fatal(err)
	}
	out := stdout(mustExec(t, m, "k", filesTools+`print(files_tools(), os.path.getsize("/session/big.txt"))`))
	if want := fmt.Sprintf("%s %d", kept, len(big)); out != want {
		t.Fatalf("after a 1 MiB write: files tools, size: %s, want %s", out, want)
	}
}
