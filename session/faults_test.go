package session_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// containerOf returns the container id of the session of key.
func containerOf(t *testing.T, m *session.Manager, key string) string {
	t.Helper()
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if in.Key == key {
			return in.ContainerID
		}
	}
	t.Fatalf("no session %q in %+v", key, list)
	return ""
}

// TestContainerLostFromOutside removes or kills a session's container behind
// the manager's back: the next execution says the session was lost (and
// why), the one after starts a fresh session.
func TestContainerLostFromOutside(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		do     func(ctx context.Context, id string) error
		reason string
	}{
		{"removed", func(ctx context.Context, id string) error { return dockertest.Engine(t).RemoveContainer(ctx, id) }, "removed"},
		{"killed", func(ctx context.Context, id string) error { return dockertest.Engine(t).KillContainer(ctx, id, "KILL") }, "killed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, nil)
			mustExec(t, m, "k", "x = 1")
			ctx := context.Background()
			if err := c.do(ctx, containerOf(t, m, "k")); err != nil {
				t.Fatal(err)
			}
			_, err := m.Exec(ctx, "k", "x")
			if !errors.Is(err, session.ErrSessionLost) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("exec after the container was %s: %v, want ErrSessionLost naming it", c.name, err)
			}
			var se *session.Error
			if !errors.As(err, &se) || se.Key != "k" {
				t.Fatalf("error does not carry the key: %#v", err)
			}
			res := mustExec(t, m, "k", "'x' in globals()")
			if plain(res) != "False" || res.ExecutionCount != 1 {
				t.Fatalf("fresh session expected: %+v", res)
			}
		})
	}
}

// TestLostSeenByANewManager: a container removed while no manager ran is
// reported once to the next manager that uses the key.
func TestLostSeenByANewManager(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	m1 := managerFor(t, cfg, ns)
	mustExec(t, m1, "k", "x = 1")
	id := containerOf(t, m1, "k")
	m1.Close(context.Background())
	if err := dockertest.Engine(t).RemoveContainer(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	m2 := managerFor(t, cfg, ns)
	if _, err := m2.Exec(context.Background(), "k", "x"); !errors.Is(err, session.ErrSessionLost) {
		t.Fatalf("got %v, want ErrSessionLost", err)
	}
	mustExec(t, m2, "k", "x = 2")
}

// TestOutOfMemoryIsReported: code that eats the container's memory costs
// the kernel's state and nothing more, under runc and under gVisor alike
// (AGENTBOX_TEST_RUNTIME=runsc), where the whole sandbox is one process for
// the host's OOM killer: the init's memory watchdog must end the worker
// first. The container (same id) and its TMPFS /session survive; the result
// says OutOfMemory and names the limit; the kernel works afterwards.
func TestOutOfMemoryIsReported(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		memoryMB int
		code     string
	}{
		// The case: the default limit, a fast allocation that
		// touches every page.
		{"fast", 1024, "b = bytearray(3 * 1024**3)"},
		// A megabyte at a time (each one written, so each counts), slowly
		// enough for many looks of the watchdog.
		{"slow", 256, "import time\nchunks = []\nwhile True:\n    chunks.append(b'\\x01' * (1 << 20))\n    time.sleep(0.002)"},
		// numpy: one allocation, pages touched as it fills them.
		{"numpy", 256, "import numpy as np\na = np.ones(1024**3 // 8)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, func(cfg *config.Config) { cfg.MemoryMB = c.memoryMB })
			mustExec(t, m, "k", "open('/session/keep.txt', 'w').write('kept'); x = 1")
			id := containerOf(t, m, "k")
			res := mustExec(t, m, "k", c.code)
			if res.Error == nil || res.Error.Name != "OutOfMemory" || !res.KernelRestarted || !res.StateLost {
				t.Fatalf("want OutOfMemory with a restart, got %+v (error %+v)", res, res.Error)
			}
			if limit := fmt.Sprintf("memory limit of %d MiB", c.memoryMB); !strings.Contains(res.Error.Value, limit) || !strings.Contains(res.Error.Value, "out-of-memory") {
				t.Errorf("error value %q does not say %q (out-of-memory)", res.Error.Value, limit)
			}
			sessionSurvived(t, m, "k", id)
		})
	}
}

// sessionSurvived checks that the session of key still runs in container id
// with its TMPFS files, and a fresh kernel that works.
func sessionSurvived(t *testing.T, m *session.Manager, key, id string) {
	t.Helper()
	res := mustExec(t, m, key, "print(open('/session/keep.txt').read(), 'x' in globals())")
	if res.Error != nil || res.Stdout != "kept False\n" {
		t.Fatalf("after the OOM kill, want the file kept and a fresh namespace: %q %+v", res.Stdout, res.Error)
	}
	if got := containerOf(t, m, key); got != id {
		t.Fatalf("container %s replaced by %s: the sandbox itself was killed", id, got)
	}
	if res := mustExec(t, m, key, "b = bytearray(64 << 20); len(b)"); plain(res) != "67108864" {
		t.Fatalf("kernel cannot allocate after the OOM kill: %+v %+v", res, res.Error)
	}
}

// TestOutOfMemoryInASubprocess: a process the code started eats the memory.
// It is the largest, so it is the one killed (by the watchdog, or under runc
// possibly by the kernel, whichever comes first): the code sees it die of
// SIGKILL and the kernel keeps its state.
func TestOutOfMemoryInASubprocess(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(cfg *config.Config) { cfg.MemoryMB = 256 })
	mustExec(t, m, "k", "open('/session/keep.txt', 'w').write('kept'); x = 1")
	id := containerOf(t, m, "k")
	res := mustExec(t, m, "k", "import subprocess, sys\nr = subprocess.run([sys.executable, '-c', 'b = bytearray(3 * 1024**3)'])\nprint(r.returncode, x)")
	if res.Error != nil || res.KernelRestarted || res.Stdout != "-9 1\n" {
		t.Fatalf("want the subprocess killed (-9) and the kernel intact: %q %q %+v", res.Stdout, res.Stderr, res.Error)
	}
	if strings.Contains(res.Stderr, "[agentbox:") && !strings.Contains(res.Stderr, "memory limit of 256 MiB") {
		t.Errorf("the watchdog's note does not name the limit: %q", res.Stderr)
	}
	if got := containerOf(t, m, "k"); got != id {
		t.Fatalf("container %s replaced by %s", id, got)
	}
	if res := mustExec(t, m, "k", "print(open('/session/keep.txt').read(), x)"); res.Stdout != "kept 1\n" {
		t.Fatalf("after the subprocess was killed: %q %+v", res.Stdout, res.Error)
	}
}

// TestOutOfMemoryFromFiles: files in a TMPFS /session are memory, but they
// are counted apart from the processes' memory limit. With the default sizes
// (TMPFS_SIZE_MB and SANDBOX_MEMORY_MB both 1024) code that writes until
// /session is full gets "no space left" (ENOSPC), never an OOM kill of the
// container (session and files lost) or of every later execution: the
// session, its state and its files stay, and the next executions run, with
// their memory, as before.
func TestOutOfMemoryFromFiles(t *testing.T) {
	t.Parallel()
	def := config.Default()
	m := newManager(t, func(cfg *config.Config) { cfg.MemoryMB = def.MemoryMB; cfg.TmpfsSizeMB = def.TmpfsSizeMB })
	mustExec(t, m, "k", "open('/session/keep.txt', 'w').write('kept'); x = 1")
	id := containerOf(t, m, "k")
	res := mustExec(t, m, "k", `
import errno
chunk = b'\x01' * (1 << 20)
try:
    with open('/session/fill', 'wb') as f:
        while True:
            f.write(chunk)
except OSError as e:
    print(errno.errorcode[e.errno])`)
	if res.Error != nil || res.KernelRestarted || strings.TrimSpace(res.Stdout) != "ENOSPC" {
		t.Fatalf("filling /session: want ENOSPC and the kernel intact, got %q %+v (error %+v)", res.Stdout, res, res.Error)
	}
	if got := containerOf(t, m, "k"); got != id {
		t.Fatalf("container %s replaced by %s: filling /session killed the sandbox", id, got)
	}
	// /session is full: the processes still have all of their memory.
	res = mustExec(t, m, "k", "import os\nb = bytearray(b'\\x01') * (512 << 20)\nprint(os.path.getsize('/session/fill') >> 20 >= 1000, open('/session/keep.txt').read(), x)")
	if res.Error != nil || res.KernelRestarted || res.Stdout != "True kept 1\n" {
		t.Fatalf("with /session full: %q %+v (error %+v)", res.Stdout, res, res.Error)
	}
	res = mustExec(t, m, "k", "os.remove('/session/fill'); del b; print(x + 1)")
	if res.Error != nil || res.Stdout != "2\n" {
		t.Fatalf("removing the files that fill /session: %q %+v", res.Stdout, res.Error)
	}
}

// TestOutOfMemoryNamesTheSessionFiles: when processes pass their limit
// while files fill a TMPFS /session, the watchdog's message says how much of
// the memory in use was those files, so that the code can free them.
func TestOutOfMemoryNamesTheSessionFiles(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(cfg *config.Config) { cfg.MemoryMB = 256; cfg.TmpfsSizeMB = 256 })
	// Written a MiB at a time: 200 MiB in one bytes object is most of the
	// processes' 256 (under gVisor past the watchdog's ceiling).
	mustExec(t, m, "k", "with open('/session/fill', 'wb') as f:\n    for _ in range(200):\n        f.write(b'\\x01' * (1 << 20))")
	res := mustExec(t, m, "k", "import time\nchunks = []\nwhile True:\n    chunks.append(b'\\x01' * (1 << 20))\n    time.sleep(0.002)")
	if res.Error == nil || res.Error.Name != "OutOfMemory" {
		t.Fatalf("want OutOfMemory, got %+v (error %+v)", res, res.Error)
	}
	if !strings.Contains(res.Error.Value, "MiB of files under /session") {
		t.Fatalf("the watchdog's message %q does not say how much was files under /session", res.Error.Value)
	}
	if !strings.Contains(res.Error.Value, "200 MiB of files under /session") {
		t.Errorf("message %q: want the 200 MiB written under /session", res.Error.Value)
	}
}

// TestInitIsNotTheOOMKillersVictim: PID 1 holds the session (its streams,
// /session's lifetime): it asks the kernel's OOM killer never to take it
// (oom_score_adj -1000, where the engine can grant it; an engine without
// CAP_SYS_RESOURCE, like a nested one, refuses to start such a container,
// and the Manager then starts it at 0), and the kernel worker, which would
// inherit that, raises its own score to the highest, so that it and what it
// runs go first.
func TestInitIsNotTheOOMKillersVictim(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	res := mustExec(t, m, "k", "import subprocess\nprint(open('/proc/1/oom_score_adj').read().strip(), open('/proc/self/oom_score_adj').read().strip(), subprocess.run(['cat', '/proc/self/oom_score_adj'], capture_output=True, text=True).stdout.strip())")
	got := strings.Fields(res.Stdout)
	if res.Error != nil || len(got) != 3 || (got[0] != "-1000" && got[0] != "0") || got[1] != "1000" || got[2] != "1000" {
		t.Fatalf("oom_score_adj of the init, the kernel and a subprocess: got %q %+v, want -1000 (or 0 where the engine cannot lower it), 1000, 1000", res.Stdout, res.Error)
	}
	t.Logf("the init's oom_score_adj: %s", got[0])
}

// TestOutOfMemoryKernelKillerBackstop: with the watchdog off, runc's kernel
// OOM killer still ends the worker and the init still names it. Under gVisor
// the host's killer would end the whole sandbox instead, which is why the
// watchdog exists.
func TestOutOfMemoryKernelKillerBackstop(t *testing.T) {
	if dockertest.IsGVisor() {
		t.Skip("gVisor has no OOM killer of its own: without the watchdog the container is lost (README, gVisor)")
	}
	t.Parallel()
	id := dockertest.Sandbox(t, func(s *docker.ContainerSpec) {
		s.Env = slices.DeleteFunc(s.Env, func(kv string) bool { return strings.HasPrefix(kv, "AGENTBOX_MEMORY_LIMIT=") })
		s.Env = append(s.Env, "AGENTBOX_MEMORY_LIMIT=0")
	})
	c := dockertest.Dial(t, id)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: "b = bytearray(3 * 1024**3)"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Name != "OutOfMemory" || !strings.Contains(res.Error.Value, "out-of-memory killer") || !res.StateLost {
		t.Fatalf("want OutOfMemory from the kernel's killer, got %+v", res.Error)
	}
	if res, err := c.Execute(ctx, kernel.ExecRequest{Code: "print(1 + 1)"}, nil); err != nil || res.Stdout != "2\n" {
		t.Fatalf("kernel unusable after the OOM kill: %v %+v", err, res)
	}
}

func TestForkBombContained(t *testing.T) {
	t.Parallel()
	if dockertest.IsGVisor() {
		// gVisor's own threads count against the limit: 64 does not even
		// let it start.
		forkBombUnderGVisor(t, newManager(t, nil))
		return
	}
	m := newManager(t, func(c *config.Config) { c.PidsLimit = 64 })
	res := mustExec(t, m, "k", forkBomb)
	if !strings.HasPrefix(res.Stdout, "contained") || res.Error != nil {
		t.Fatalf("fork bomb: %q %+v", res.Stdout, res.Error)
	}
	if out, err := exec.Command("true").CombinedOutput(); err != nil {
		t.Fatalf("host cannot fork after the bomb: %v %s", err, out)
	}
	if res := mustExec(t, m, "k", "n"); plain(res) == "" {
		t.Fatalf("session unusable after the bomb: %+v", res)
	}
}

// forkBombUnderGVisor: with the ptrace platform every process of the
// sandbox is a process on the host too, so the pids limit is reached by
// gVisor itself, which then stops the whole sandbox (Debian's runsc
// 0.0~20221219 enforces no RLIMIT_NPROC either): the bomb costs the session,
// never the host. The call returns within its timeout plus a few seconds
// as a lost session, or contained, and the next call works.
func forkBombUnderGVisor(t *testing.T, m *session.Manager) {
	const timeout = 10 * time.Second
	mustExec(t, m, "k", "x = 1")
	start := time.Now()
	res, err := m.Exec(context.Background(), "k", forkBomb, session.Timeout(timeout))
	if took := time.Since(start); took > timeout+25*time.Second {
		t.Fatalf("the call took %s", took)
	}
	switch {
	case errors.Is(err, session.ErrSessionLost):
	case err == nil && strings.HasPrefix(res.Stdout, "contained"):
	default:
		t.Fatalf("fork bomb under gVisor: %+v, %v", res, err)
	}
	if out, err := exec.Command("true").CombinedOutput(); err != nil {
		t.Fatalf("host cannot fork after the bomb: %v %s", err, out)
	}
	if res := mustExec(t, m, "k", "1 + 1"); plain(res) != "2" {
		t.Fatalf("session unusable after the bomb: %+v", res)
	}
}

const forkBomb = `
import os, time
n = 0
try:
    for i in range(10000):
        pid = os.fork()
        if pid == 0:
            time.sleep(2)
            os._exit(0)
        n += 1
    print("not contained", n)
except OSError as e:
    print("contained", n, e.errno)
for _ in range(n):
    os.wait()
`

func TestFullSessionDiskIsAnError(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.TmpfsSizeMB = 16 })
	res := mustExec(t, m, "k", `
with open("/session/big", "wb") as f:
    for _ in range(64):
        f.write(b"x" * (1 << 20))`)
	if res.Error == nil || res.Error.Name != "OSError" || !strings.Contains(res.Error.Value, "No space left") {
		t.Fatalf("want ENOSPC as an OSError, got %+v", res.Error)
	}
	res = mustExec(t, m, "k", "import os; os.remove('/session/big'); print('ok')")
	if res.Stdout != "ok\n" {
		t.Fatalf("after ENOSPC: %+v", res)
	}
}

func TestIdleSessionsAreSwept(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.IdleTimeout = time.Second }, session.WithSweepInterval(200*time.Millisecond))
	mustExec(t, m, "idle", "x = 1")
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := m.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle session not swept: %+v", list)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// An evicted session is not an accident: the next call starts afresh
	// without an error.
	res := mustExec(t, m, "idle", "'x' in globals()")
	if plain(res) != "False" {
		t.Fatalf("after eviction: %+v", res)
	}
}

func TestHostileKeys(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.SessionStorage = config.StorageBind })
	keys := []string{"../../etc", "/", "a key with spaces", "ключ 🔑", strings.Repeat("k", 1000), "nul\x00byte", "'; DROP TABLE sessions; --"}
	for _, k := range keys {
		res := mustExec(t, m, k, "print('ok')")
		if res.Stdout != "ok\n" || res.Session != k {
			t.Fatalf("key %q: %+v", k, res)
		}
	}
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(keys) {
		t.Fatalf("want %d sessions, got %d", len(keys), len(list))
	}
	for _, in := range list {
		if in.ID != session.ID(in.Key) {
			t.Fatalf("session %q has id %q, want %q", in.Key, in.ID, session.ID(in.Key))
		}
	}
	if _, err := m.Exec(context.Background(), "", "1"); !errors.Is(err, session.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := m.Exec(context.Background(), strings.Repeat("k", session.MaxKeyBytes+1), "1"); !errors.Is(err, session.ErrInvalidKey) {
		t.Fatalf("long key: %v", err)
	}
}

// TestEndedContainerStillThere: a container whose end another process
// already recorded (an idle eviction, say) but that the engine still shows,
// dead, while that process removes it, is not a new loss: the next call
// runs in a fresh session that gives the recorded reason. Before, it failed
// with "session lost: ... was killed (exit code 137)", and overwrote the
// reason.
func TestEndedContainerStillThere(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	m1 := managerFor(t, cfg, ns)
	mustExec(t, m1, "k", "x = 1")
	id := containerOf(t, m1, "k")
	m1.Close(context.Background())
	ctx := context.Background()
	// What the evicting process has done by then: killed it, recorded why.
	if err := dockertest.Engine(t).KillContainer(ctx, id, "KILL"); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, cfg)
	if err := st.StopSession(ctx, ns, session.ID("k"), time.Now(), "idle: evicted after 3s unused (its idle timeout)"); err != nil {
		t.Fatal(err)
	}
	m2 := managerFor(t, cfg, ns)
	res, err := m2.Exec(ctx, "k", "'x' in globals()")
	if err != nil {
		t.Fatalf("first call on a session whose end was recorded: %v; want a fresh session", err)
	}
	if plain(res) != "False" || !res.StateLost || !strings.Contains(res.RestartReason, "evicted after 3s") {
		t.Fatalf("first call: %q, StateLost %v, reason %q; want a fresh session giving the recorded reason", plain(res), res.StateLost, res.RestartReason)
	}
	if got := containerOf(t, m2, "k"); got == id {
		t.Fatalf("the dead container %s serves the session", id)
	}
}

// TestDecidedEndIsCarriedOut: a container whose eviction another process
// recorded but never carried out (it died, or the engine refused the
// removal) is removed by the next sweep, in any process: nothing can claim
// it again. Before, every later sweep found the eviction recorded, failed
// to claim it, and left the container running for good.
func TestDecidedEndIsCarriedOut(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.IdleTimeout = time.Second })
	ns := namespace()
	ctx := context.Background()
	m1 := managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	mustExec(t, m1, "k", "x = 1")
	id := containerOf(t, m1, "k")
	m1.Close(ctx)
	st := openStore(t, cfg)
	// What the evicting process did before it died: the claim.
	if ok, err := st.EvictSession(ctx, ns, session.ID("k"), id, time.Now(), time.Now(), "idle: evicted after 1s unused (its idle timeout)"); err != nil || !ok {
		t.Fatalf("claim the eviction: %v, %v", ok, err)
	}
	managerFor(t, cfg, ns, session.WithSweepInterval(100*time.Millisecond))
	cli := dockertest.Engine(t)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := cli.InspectContainer(ctx, id); errors.Is(err, docker.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s, whose eviction is recorded, still there after 20 s of sweeps", id)
		}
	}
}

// TestWrongLossRecordKeepsTheSession: a running container whose row says it
// was lost (an older agentbox ended the row of whatever container replaced
// the one it lost) keeps its session and state, in the process that holds
// it and in a new one, and is recorded live again. Removing it for the
// record would destroy a live session.
func TestWrongLossRecordKeepsTheSession(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	ctx := context.Background()
	m1 := managerFor(t, cfg, ns)
	mustExec(t, m1, "k", "x = 41")
	id := containerOf(t, m1, "k")
	st := openStore(t, cfg)
	if err := st.StopSession(ctx, ns, session.ID("k"), time.Now(), "lost: was removed"); err != nil {
		t.Fatal(err)
	}
	for i, m := range []*session.Manager{managerFor(t, cfg, ns), m1} {
		res := mustExec(t, m, "k", "x += 1\nx")
		if res.StateLost || plain(res) != strconv.Itoa(42+i) {
			t.Fatalf("manager %d on a running session wrongly recorded lost: %q, StateLost %v (%s)", i+1, plain(res), res.StateLost, res.RestartReason)
		}
	}
	if got := containerOf(t, m1, "k"); got != id {
		t.Fatalf("container %s replaced by %s", id, got)
	}
	if row, err := st.Session(ctx, ns, session.ID("k")); err != nil || !row.Stopped.IsZero() {
		t.Fatalf("row after the session was used again: %+v, %v; want it live", row, err)
	}
}
