package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
)

// TestCodeCannotReachTheInit runs, as a cell would, every way we know of to
// reach PID 1 (the init that brokers the kernel for the host) and checks
// that each is refused, and that the session still answers afterwards: user
// code could otherwise forge results the host records, squat execution ids,
// or stop the session for good.
func TestCodeCannotReachTheInit(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	// gvisor is what Debian's runsc (0.0~20221219) gives instead, when it
	// differs: its /proc does not check who may look into another
	// process, and its SO_PEERCRED does not tell the sandbox user from
	// root (README, Security, gVisor). The cases pin that down, so a runsc
	// that fixes it fails here and the README gets updated.
	cases := []struct {
		name, code, want, gvisor string
	}{
		{"ptrace attach", `
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_SEIZE, PTRACE_DETACH = 16, 0x4206, 17
r = libc.ptrace(PTRACE_ATTACH, 1, 0, 0)
e = ctypes.get_errno()
s = libc.ptrace(PTRACE_SEIZE, 1, 0, 0)
if r == 0 or s == 0:
    libc.ptrace(PTRACE_DETACH, 1, 0, 0)
print("attached" if r == 0 or s == 0 else "refused", errno.errorcode.get(e))`, "refused", ""},
		{"read and write its memory", `
try:
    open("/proc/1/mem", "r+b")
    print("opened")
except OSError as e:
    print("refused", e.errno)`, "refused", ""},
		{"its open files", `
import os
try:
    print("listed", os.listdir("/proc/1/fd"))
except OSError as e:
    print("refused", e.errno)`, "refused", "listed"},
		{"its environment", `
try:
    print("read", open("/proc/1/environ", "rb").read()[:40])
except OSError as e:
    print("refused", e.errno)`, "refused", "read"},
		{"signals", `
import os, signal
out = []
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL, signal.SIGSTOP, signal.SIGUSR1):
    try:
        os.kill(1, s)
        out.append("sent " + s.name)
    except PermissionError:
        pass
print(" ".join(out) or "refused")`, "refused", ""},
		// Under gVisor /proc/1/fd lists the init's descriptors (see "its
		// open files"); what keeps code from writing into them (the host's
		// streams, the worker's pipes, the signal wake-up pipe) is that
		// they belong to root. Nothing may be written there, and were it
		// ever, bytes in the wake-up pipe must not pass for a signal.
		{"write into its descriptors", `
import os, stat
written = []
try:
    for n in os.listdir("/proc/1/fd"):
        try:
            fd = os.open("/proc/1/fd/" + n, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            null = stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
            if not null and os.write(fd, bytes([15, 1, 2, 15])):
                written.append(n)
        except OSError:
            pass
        finally:
            os.close(fd)
    print("written %s" % written if written else "refused")
except OSError as e:
    print("refused", e.errno)`, "refused", ""},
		{"broker sockets", `
import socket
got = []
for name in ("\0agentbox/kernel", "\0agentbox/kernel.handoff"):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    try:
        s.connect(name)
        s.sendall(b'{"type": "get", "id": "x"}\n{"type": "ping"}\n')
        data = s.recv(4096)
        if data:
            got.append(data[:60])
    except OSError:
        pass
    finally:
        s.close()
print(got or "refused")`, "refused", "[b'{\"type\":\"hello\""},
		{"capability bounding set empty", `print([l for l in open("/proc/self/status") if l.startswith("CapBnd")][0].split()[1])`, "0000000000000000", ""},
		{"no capability left to regain", `print([l for l in open("/proc/self/status") if l.startswith("CapPrm")][0].split()[1])`, "0000000000000000", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A session each: an attempt that worked must not spoil the next.
			key := "hostile " + c.name
			mustExec(t, m, key, "kept = 41")
			res := mustExec(t, m, key, c.code)
			if res.Error != nil {
				t.Fatalf("raised: %+v\n%s", res.Error, res.Stderr)
			}
			want := c.want
			if dockertest.IsGVisor() && c.gvisor != "" {
				want = c.gvisor
			}
			if got := strings.TrimSpace(res.Stdout); !strings.HasPrefix(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			// The init is untouched: the next execution runs at once, with
			// the session's state.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			id := containerOf(t, m, key)
			time.Sleep(200 * time.Millisecond) // an init that took a forged signal would be stopping now
			res, err := m.Exec(ctx, key, "kept + 1")
			if err != nil || plain(res) != "42" || res.KernelRestarted {
				t.Fatalf("session after the attempt: %+v, %v", res, err)
			}
			if got := containerOf(t, m, key); got != id {
				t.Fatalf("container %s replaced by %s after the attempt", id, got)
			}
		})
	}
}

// TestArtifactsInPrivateFolders: the init lists new artifacts with the
// sandbox user's permissions, so a folder only that user may read (mode
// 0700) is listed like any other; root without capabilities could not.
func TestArtifactsInPrivateFolders(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	res := mustExec(t, m, "private", `
import os
os.makedirs('/session/artifacts/private/deeper', mode=0o700)
os.chmod('/session/artifacts/private', 0o700)
open('/session/artifacts/private/deeper/report.txt', 'w').write('mine')
os.chmod('/session/artifacts/private/deeper/report.txt', 0o600)`)
	if len(res.Artifacts) != 1 || res.Artifacts[0].Name != "private/deeper/report.txt" {
		t.Fatalf("artifacts %+v, skipped %+v: want the file in the private folder", res.Artifacts, res.SkippedArtifacts)
	}
}
