package session_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/session"
)

func mustRun(t *testing.T, m *session.Manager, key string, cmd session.Command) *session.CommandResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := m.Run(ctx, key, cmd)
	if err != nil {
		t.Fatalf("run %q: %v", cmd.Line, err)
	}
	return res
}

// marker returns a name no other process in any container has, to find
// the processes a test starts.
func marker() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "agentbox-mark-" + hex.EncodeToString(b[:])
}

// processesNamed lists, from outside (docker exec as root, not through the
// code under test), the processes in container id whose command line holds
// mark.
func processesNamed(t *testing.T, id, mark string) []string {
	t.Helper()
	script := `import os, sys
mark = sys.argv[1].encode()
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            cmd = open("/proc/%s/cmdline" % p, "rb").read()
            st = open("/proc/%s/stat" % p, "rb").read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if mark in cmd and st != b"Z":
            print(p, cmd.replace(b"\0", b" ").decode(errors="replace"))
`
	out, err := exec.Command("docker", "exec", "-u", "0", id, "python3", "-c", script, mark).CombinedOutput()
	if err != nil {
		t.Fatalf("list processes: %v: %s", err, out)
	}
	var procs []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			procs = append(procs, l)
		}
	}
	return procs
}

// TestRunBasics: output, exit code, the sandbox user, the default folder,
// extra environment, streaming sinks, and the history's record.
func TestRunBasics(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	m := managerFor(t, cfg, namespace())
	var streamed bytes.Buffer
	res := mustRun(t, m, "k", session.Command{
		Line:   `echo "out $(id -u):$(id -g) $PWD $GREETING"; echo err >&2; exit 3`,
		Env:    map[string]string{"GREETING": "hello world"},
		Stdout: &streamed,
	})
	if res.ExitCode != 3 || res.Stdout != "out 1000:1000 /session hello world\n" || res.Stderr != "err\n" || res.TimedOut || res.Interrupted {
		t.Fatalf("result %+v", res)
	}
	if streamed.String() != res.Stdout {
		t.Fatalf("streamed %q, result %q", streamed.String(), res.Stdout)
	}
	if res.Duration <= 0 || res.Duration > time.Minute || !strings.HasPrefix(res.ID, "cmd-") {
		t.Fatalf("duration %s, id %q", res.Duration, res.ID)
	}
	res = mustRun(t, m, "k", session.Command{Line: "pwd; echo $GREETING", Cwd: "/tmp"})
	if res.Stdout != "/tmp\n\n" {
		t.Fatalf("cwd /tmp, no GREETING: %q", res.Stdout)
	}
	// The command saw no capability and can gain none.
	res = mustRun(t, m, "k", session.Command{Line: "grep -E '^Cap(Eff|Bnd|Prm)' /proc/self/status"})
	if strings.Count(res.Stdout, "0000000000000000") != 3 {
		t.Fatalf("capabilities of a command: %q", res.Stdout)
	}
	st, err := store.Open(context.Background(), cfg.ArtifactsDB)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := st.Executions(context.Background(), m.Namespace(), session.ID("k"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || h[0].Kind != "shell" || h[0].ExitCode == nil || *h[0].ExitCode != 3 || !strings.Contains(h[0].Code, "GREETING") || h[0].Stderr != "err\n" {
		t.Fatalf("history %+v", h)
	}
}

// TestRunBesideKernel: a long command does not hold executions on the same
// key, and the Python state is untouched by commands.
func TestRunBesideKernel(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	mustExec(t, m, "k", "x = 41")
	done := make(chan *session.CommandResult, 1)
	go func() {
		res, err := m.Run(context.Background(), "k", session.Command{Line: "sleep 20; echo late"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	time.Sleep(time.Second) // the command is running
	start := time.Now()
	res := mustExec(t, m, "k", "x + 1")
	if plain(res) != "42" {
		t.Fatalf("exec beside a command: %+v", res)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("exec waited %s for the command", d)
	}
	select {
	case r := <-done:
		t.Fatalf("the command ended before the exec: %+v", r)
	default:
	}
	if r := <-done; r == nil || r.Stdout != "late\n" || r.ExitCode != 0 {
		t.Fatalf("command: %+v", r)
	}
}

// TestRunTimeoutKillsEveryProcess: at the timeout the command and every
// process it started die, even ones that ignore SIGTERM, left the process
// group (setsid), were orphaned by a double fork, or both; none survives.
func TestRunTimeoutKillsEveryProcess(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.InterruptGrace = time.Second })
	mark := marker()
	line := `trap '' TERM
(exec -a ` + mark + `-child sleep 1000) &
setsid bash -c 'trap "" TERM; exec -a ` + mark + `-setsid sleep 1000' &
( (trap '' TERM; exec -a ` + mark + `-orphan sleep 1000) & ) &
( setsid bash -c 'trap "" TERM; exec -a ` + mark + `-detached sleep 1000' & ) &
echo started
exec -a ` + mark + `-main sleep 1000`
	start := time.Now()
	res := mustRun(t, m, "k", session.Command{Line: line, Timeout: 2 * time.Second})
	if !res.TimedOut || res.ExitCode != 128+9 && res.ExitCode != 128+15 || res.Stdout != "started\n" {
		t.Fatalf("result %+v", res)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("took %s", d)
	}
	if left := processesNamed(t, containerOf(t, m, "k"), mark); len(left) > 0 {
		t.Fatalf("survivors after the timeout: %q", left)
	}
}

// TestRunExitKillsLeftovers: what a command leaves running when it exits
// is killed: it is no daemon launcher (StartCommand is).
func TestRunExitKillsLeftovers(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	mark := marker()
	res := mustRun(t, m, "k", session.Command{Line: `setsid bash -c 'exec -a ` + mark + ` sleep 1000' >/dev/null 2>&1 & sleep 1; echo ok`})
	if res.Stdout != "ok\n" || res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	if left := processesNamed(t, containerOf(t, m, "k"), mark); len(left) > 0 {
		t.Fatalf("survivors after the command exited: %q", left)
	}
}

// TestRunHugeOutput: 100 MiB printed is capped (head and tail kept, the cut
// counted), in the result and in what was streamed.
func TestRunHugeOutput(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.MaxOutputBytes = 64 << 10 })
	var streamed countWriter
	res := mustRun(t, m, "k", session.Command{
		Line:   `echo FIRST; head -c 104857600 /dev/zero | tr '\0' x; echo; echo LAST`,
		Stdout: &streamed,
	})
	const total = 6 + 100<<20 + 1 + 5
	if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "FIRST\nxxx") || !strings.HasSuffix(res.Stdout, "xxx\nLAST\n") {
		t.Fatalf("exit %d, stdout %q...%q", res.ExitCode, res.Stdout[:min(20, len(res.Stdout))], res.Stdout[max(0, len(res.Stdout)-20):])
	}
	if res.Truncated["stdout"] != total-64<<10 || !strings.Contains(res.Stdout, "bytes of stdout cut here") {
		t.Fatalf("truncated %v, len %d", res.Truncated, len(res.Stdout))
	}
	if len(res.Stdout) > 64<<10+200 || streamed.n > 64<<10+200 {
		t.Fatalf("kept %d bytes, streamed %d, cap 64 KiB", len(res.Stdout), streamed.n)
	}
}

type countWriter struct {
	mu sync.Mutex
	n  int
}

func (w *countWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.n += len(p)
	w.mu.Unlock()
	return len(p), nil
}

// TestRunBadInput: refused before anything runs, naming what is wrong.
func TestRunBadInput(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := context.Background()
	cases := []struct {
		name string
		cmd  session.Command
		want string
	}{
		{"empty", session.Command{Line: "  "}, "empty command line"},
		{"nul", session.Command{Line: "echo \x00"}, "NUL"},
		{"relative cwd", session.Command{Line: "true", Cwd: "session"}, `"session"`},
		{"env name with =", session.Command{Line: "true", Env: map[string]string{"A=B": "c"}}, `"A=B"`},
		{"env name with newline", session.Command{Line: "true", Env: map[string]string{"A\nB": "c"}}, `"A\nB"`},
		{"env name digit", session.Command{Line: "true", Env: map[string]string{"1A": "c"}}, `"1A"`},
		{"env reserved", session.Command{Line: "true", Env: map[string]string{"AGENTBOX_USER": "0"}}, "AGENTBOX_USER"},
		{"env value nul", session.Command{Line: "true", Env: map[string]string{"A": "\x00"}}, "NUL"},
		{"negative timeout", session.Command{Line: "true", Timeout: -time.Second}, "timeout"},
	}
	for _, c := range cases {
		_, err := m.Run(ctx, "k", c.cmd)
		var se *session.Error
		if !errors.Is(err, session.ErrInvalidCommand) || !strings.Contains(err.Error(), c.want) || !errors.As(err, &se) || se.Key != "k" {
			t.Errorf("%s: %v, want ErrInvalidCommand naming %s and the key", c.name, err, c.want)
		}
	}
}

// TestRunMissingCwd: a folder that does not exist, or is not the sandbox
// user's to enter, is a *CommandError naming it.
func TestRunMissingCwd(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := context.Background()
	_, err := m.Run(ctx, "k", session.Command{Line: "true", Cwd: "/session/nope"})
	var ce *session.CommandError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &ce) || ce.Path != "/session/nope" || !strings.Contains(err.Error(), "/session/nope") {
		t.Fatalf("missing cwd: %v", err)
	}
	_, err = m.Run(ctx, "k", session.Command{Line: "true", Cwd: "/root"})
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "/root") {
		t.Fatalf("cwd /root: %v, want a permission error naming it", err)
	}
	mustRun(t, m, "k", session.Command{Line: "echo hi > /session/file"})
	_, err = m.Run(ctx, "k", session.Command{Line: "true", Cwd: "/session/file"})
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("cwd a file: %v", err)
	}
}

// TestRunContainerRemoved: the container removed mid-command is
// ErrSessionLost, promptly.
func TestRunContainerRemoved(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	mustRun(t, m, "k", session.Command{Line: "true"})
	id := containerOf(t, m, "k")
	go func() {
		time.Sleep(time.Second)
		exec.Command("docker", "rm", "-f", id).Run()
	}()
	start := time.Now()
	_, err := m.Run(context.Background(), "k", session.Command{Line: "sleep 100"})
	// docker rm -f kills, then removes: either may be what the engine
	// shows first.
	if !errors.Is(err, session.ErrSessionLost) || !strings.Contains(err.Error(), "removed") && !strings.Contains(err.Error(), "killed") {
		t.Fatalf("container removed mid-command: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("took %s", d)
	}
}

// TestRunContextCancel: cancelling the caller's context kills the command
// (and what it started), and the result says it was interrupted.
func TestRunContextCancel(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.InterruptGrace = time.Second })
	mustRun(t, m, "k", session.Command{Line: "true"})
	mark := marker()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancelled once the command has said it ignores SIGTERM: a fixed
	// delay may end it before the trap on a loaded machine.
	res, err := m.Run(ctx, "k", session.Command{
		Line:   "trap '' TERM; echo go; exec -a " + mark + " sleep 1000",
		Stdout: onText("go", cancel),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.TimedOut || res.Stdout != "go\n" {
		t.Fatalf("result %+v", res)
	}
	if left := processesNamed(t, containerOf(t, m, "k"), mark); len(left) > 0 {
		t.Fatalf("survivors after cancel: %q", left)
	}
}

// TestRunCannotKillSupervisor: the command cannot signal the process that
// will kill it at the timeout (it runs as root, the command as the
// sandbox user), so killing its parent does not let it outlive the
// timeout.
func TestRunCannotKillSupervisor(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.InterruptGrace = time.Second })
	mark := marker()
	res := mustRun(t, m, "k", session.Command{
		Line:    `kill -9 $PPID && echo killed || echo refused; kill -STOP $PPID 2>/dev/null || echo refused; exec -a ` + mark + ` sleep 1000`,
		Timeout: 2 * time.Second,
	})
	if !res.TimedOut || res.Stdout != "refused\nrefused\n" {
		t.Fatalf("result %+v", res)
	}
	if left := processesNamed(t, containerOf(t, m, "k"), mark); len(left) > 0 {
		t.Fatalf("survivors: %q", left)
	}
}

// TestBackgroundCommand: start, poll, read logs from a cursor, kill (every
// process gone), and a background command that ends by itself, recorded.
func TestBackgroundCommand(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.InterruptGrace = time.Second })
	ctx := context.Background()
	mark := marker()
	id, err := m.StartCommand(ctx, "k", session.Command{
		Line: `trap '' TERM; (exec -a ` + mark + ` sleep 1000) & for i in $(seq 1 1000); do echo line $i; echo err $i >&2; sleep 0.1; done`,
	})
	if err != nil {
		t.Fatal(err)
	}
	// An exec is not held by it.
	if res := mustExec(t, m, "k", "1 + 1"); plain(res) != "2" {
		t.Fatalf("exec beside: %+v", res)
	}
	var cursor int64
	var text string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(text, "line 5\n"); {
		if time.Now().After(deadline) {
			t.Fatalf("logs so far %q", text)
		}
		logs, err := m.CommandLogs(ctx, "k", id, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if !logs.Running || logs.Skipped != 0 {
			t.Fatalf("logs %+v", logs)
		}
		for _, c := range logs.Chunks {
			if c.Stream == "stdout" {
				text += c.Data
			}
		}
		cursor = logs.Next
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.HasPrefix(text, "line 1\nline 2\n") {
		t.Fatalf("stdout from the cursors: %q", text)
	}
	st, err := m.CommandStatus(ctx, "k", id)
	if err != nil || !st.Running || st.Line == "" {
		t.Fatalf("status %+v %v", st, err)
	}
	if err := m.KillCommand(ctx, "k", id); err != nil {
		t.Fatal(err)
	}
	st, err = m.CommandStatus(ctx, "k", id)
	if err != nil || st.Running || st.Result == nil || !st.Result.Interrupted || !strings.HasPrefix(st.Result.Stdout, "line 1\n") {
		t.Fatalf("status after kill %+v %v", st, err)
	}
	if left := processesNamed(t, containerOf(t, m, "k"), mark); len(left) > 0 {
		t.Fatalf("survivors after kill: %q", left)
	}

	id2, err := m.StartCommand(ctx, "k", session.Command{Line: "echo done; exit 7"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err = m.WaitCommand(wctx, "k", id2)
	if err != nil || st.Result == nil || st.Result.ExitCode != 7 || st.Result.Stdout != "done\n" {
		t.Fatalf("status %+v %v", st, err)
	}
	if _, err := m.CommandStatus(ctx, "other", id2); !errors.Is(err, session.ErrUnknownCommand) {
		t.Fatalf("another key's command: %v", err)
	}
	if _, err := m.CommandLogs(ctx, "k", "cmd-nope", 0); !errors.Is(err, session.ErrUnknownCommand) || !strings.Contains(err.Error(), "cmd-nope") {
		t.Fatalf("unknown id: %v", err)
	}
	// A background command with a bad folder fails in its status.
	id3, err := m.StartCommand(ctx, "k", session.Command{Line: "true", Cwd: "/nope"})
	if err != nil {
		t.Fatal(err)
	}
	st, err = m.WaitCommand(wctx, "k", id3)
	if err != nil || !errors.Is(st.Err, fs.ErrNotExist) || st.Result != nil {
		t.Fatalf("status %+v %v", st, err)
	}
}

// TestBackgroundCommandTimeout: the timeout of a background command kills
// it like Run's.
func TestBackgroundCommandTimeout(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.InterruptGrace = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := m.StartCommand(ctx, "k", session.Command{Line: "trap '' TERM; sleep 1000", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.WaitCommand(ctx, "k", id)
	if err != nil || st.Result == nil || !st.Result.TimedOut {
		t.Fatalf("status %+v %v", st, err)
	}
}

// onText returns a writer that calls f once what was written to it
// contains text.
func onText(text string, f func()) io.Writer {
	var (
		mu   sync.Mutex
		seen strings.Builder
		once sync.Once
	)
	return writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		seen.Write(p)
		hit := strings.Contains(seen.String(), text)
		mu.Unlock()
		if hit {
			once.Do(f)
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
