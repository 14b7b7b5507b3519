package session_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
)

// deniedProbe calls, as a cell would, each syscall agentbox's seccomp
// profile removes, with arguments that do nothing harmful if the call is
// let through, and prints one "name result" line per call: "ok" or the
// errno's name. The numbers are x86_64's (the io_uring calls, 425-427, and
// pidfd_getfd and process_madvise, 438 and 440, are the same everywhere).
const deniedProbe = `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args)
    e = ctypes.get_errno()
    if r >= 0 and name in ("io_uring_setup", "userfaultfd"):
        os.close(r)
    print(name, "ok" if r >= 0 else errno.errorcode.get(e, e))
buf = ctypes.create_string_buffer(256)
me = os.getpid()
call("io_uring_setup", 425, 1, buf)
call("io_uring_enter", 426, -1, 0, 0, 0, None, 0)
call("io_uring_register", 427, -1, 0, None, 0)
call("userfaultfd", 323, 1)                     # UFFD_USER_MODE_ONLY
call("perf_event_open", 298, None, 0, -1, -1, 0)
call("bpf", 321, 0, None, 0)
call("keyctl", 250, 0, -3, 0)                   # KEYCTL_GET_KEYRING_ID of the session keyring
call("add_key", 248, b"user", b"probe", None, 0, 0)
call("request_key", 249, b"user", b"probe", None, 0)
call("ptrace", 101, 3, me, 0, 0)                # PTRACE_PEEKUSER of itself, not traced
call("process_vm_readv", 310, me, None, 0, None, 0, 0)
call("process_vm_writev", 311, me, None, 0, None, 0, 0)
call("process_madvise", 440, -1, None, 0, 0, 0)
call("kcmp", 312, me, me, 0, 0, 0)              # KCMP_FILE: fd 0 against itself
call("pidfd_getfd", 438, -1, 0, 0)
call("fanotify_init", 300, 0, 0)
call("fanotify_mark", 301, -1, 0, 0, -1, None)
call("name_to_handle_at", 303, -100, b"/", buf, buf, 0)
call("open_by_handle_at", 304, -1, None, 0)
call("modify_ldt", 154, 0, buf, 0)              # read 0 bytes of the LDT
call("vmsplice", 278, -1, None, 0, 0)
`

// probeResults parses deniedProbe's output into name -> result.
func probeResults(t *testing.T, out string) map[string]string {
	t.Helper()
	got := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, result, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("probe printed %q", line)
		}
		got[name] = result
	}
	return got
}

// TestSeccompBlocksIoUring runs the probe in a default session: every
// syscall the profile removes fails with EPERM (or ENOSYS).
func TestSeccompBlocksIoUring(t *testing.T) {
	if dockertest.IsGVisor() {
		t.Skip("gVisor applies a container's seccomp profile only with runsc --oci-seccomp, which hangs pyarrow in Debian's runsc (README, gVisor); its own kernel answers these calls")
	}
	if runtime.GOARCH != "amd64" {
		t.Skipf("the probe uses x86_64 syscall numbers; this is %s", runtime.GOARCH)
	}
	t.Parallel()
	m := newManager(t, nil)
	res := mustExec(t, m, "seccomp", deniedProbe)
	if res.Error != nil {
		t.Fatalf("probe raised: %+v\n%s", res.Error, res.Stderr)
	}
	got := probeResults(t, res.Stdout)
	for _, name := range strings.Fields(`io_uring_setup io_uring_enter io_uring_register userfaultfd
		perf_event_open bpf keyctl add_key request_key ptrace process_vm_readv process_vm_writev
		process_madvise kcmp pidfd_getfd fanotify_init fanotify_mark name_to_handle_at
		open_by_handle_at modify_ldt vmsplice`) {
		switch r, ok := got[name]; {
		case !ok:
			t.Errorf("%s: not probed (output %q)", name, res.Stdout)
		case r != "EPERM" && r != "ENOSYS":
			t.Errorf("%s: %s, want EPERM or ENOSYS", name, r)
		}
	}
}

// TestSeccompEngineProfileAllowsIoUring shows that it is agentbox's profile
// that refuses io_uring: with SANDBOX_SECCOMP=engine, sessions get the
// engine's own default profile, which on Docker 20.10 lets io_uring_setup
// through. What the engine's default does is first seen in a plain
// container, so that a session that still had agentbox's profile cannot
// pass for an engine that refuses io_uring itself.
func TestSeccompEngineProfileAllowsIoUring(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the probe uses x86_64 syscall numbers; this is %s", runtime.GOARCH)
	}
	t.Parallel()
	cli := dockertest.Engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain, err := imagesetup.ProbeSeccomp(ctx, cli, dockertest.Image(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if plain.IoUringSetup != "ok" {
		t.Skipf("the engine's own default profile (or the kernel) already refuses io_uring_setup (%s): nothing to tell apart here", plain.IoUringSetup)
	}
	m := newManager(t, func(c *config.Config) { c.Seccomp = config.SeccompEngine })
	res := mustExec(t, m, "seccomp", deniedProbe)
	if res.Error != nil {
		t.Fatalf("probe raised: %+v\n%s", res.Error, res.Stderr)
	}
	got := probeResults(t, res.Stdout)
	t.Logf("under the engine's profile: %v", got)
	if got["io_uring_setup"] != "ok" || got["ptrace"] != "ESRCH" {
		t.Fatalf("with SANDBOX_SECCOMP=engine: io_uring_setup %s, ptrace %s; want both let through (ok, ESRCH) as in a plain container", got["io_uring_setup"], got["ptrace"])
	}
}

// TestSeccompKeepsOrdinaryWork runs, under the default profile, what cells
// do every day and what the init relies on: numpy and its BLAS threads,
// pandas, a matplotlib figure, scipy, scikit-learn, threads, os.fork, a
// subprocess, a multiprocessing pool, asyncio's child watcher, and file
// descriptors passed over a Unix socket.
func TestSeccompKeepsOrdinaryWork(t *testing.T) {
	t.Parallel()
	// Imports of numpy, pandas, scipy, sklearn and matplotlib, a fork, a
	// pool and a subprocess under a CPU limit: tens of seconds on a loaded
	// machine. The bounds are safety nets, far above that.
	m := newManager(t, func(c *config.Config) { c.ExecTimeout = 5 * time.Minute })
	code := `
import os, subprocess, threading, socket, array, asyncio, multiprocessing
import numpy as np, pandas as pd, scipy.linalg, sklearn.linear_model
import matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot as plt
out = []
a = np.random.default_rng(0).random((400, 400))
out.append("numpy %d" % round(float(np.trace(a @ np.linalg.inv(a)))))
out.append("pandas %d" % pd.DataFrame({"x": range(10)}).x.sum())
out.append("scipy %d" % round(float(scipy.linalg.det(np.eye(3) * 2))))
X = np.arange(20.0).reshape(-1, 1)
out.append("sklearn %.1f" % sklearn.linear_model.LinearRegression().fit(X, 3 * X.ravel() + 1).coef_[0])
fig = plt.figure(); plt.plot([1, 2, 3]); fig.savefig("/tmp/f.png"); plt.close(fig)
out.append("png %s" % (os.path.getsize("/tmp/f.png") > 0))
box = []
ts = [threading.Thread(target=box.append, args=(i,)) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
out.append("threads %d" % len(box))
pid = os.fork()
if pid == 0:
    os._exit(7)
out.append("fork %d" % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
out.append("subprocess " + subprocess.run(["sh", "-c", "echo $((6*7))"], capture_output=True, text=True).stdout.strip())
with multiprocessing.get_context("fork").Pool(2) as pool:
    out.append("pool %d" % sum(pool.map(abs, [-1, -2, -3])))
async def child():
    p = await asyncio.create_subprocess_exec("true")
    return await p.wait()
out.append("asyncio %d" % asyncio.run(child()))
a_, b_ = socket.socketpair()
r, w = os.pipe()
a_.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
msg, anc, _, _ = b_.recvmsg(1, socket.CMSG_SPACE(4))
fd = array.array("i", anc[0][2])[0]
os.write(fd, b"passed"); out.append("scm_rights " + os.read(r, 6).decode())
print("; ".join(out))
`
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := m.Exec(ctx, "ordinary", code)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("raised: %+v\n%s", res.Error, res.Stderr)
	}
	want := "numpy 400; pandas 45; scipy 8; sklearn 3.0; png True; threads 8; fork 7; subprocess 42; pool 6; asyncio 0; scm_rights passed"
	if got := strings.TrimSpace(res.Stdout); got != want {
		t.Fatalf("got  %q\nwant %q\nstderr: %s", got, want, res.Stderr)
	}
}
