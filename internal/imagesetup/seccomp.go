package imagesetup

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/docker"
)

// SeccompProbe is what code in a throwaway sandbox saw when it made two
// syscalls agentbox's seccomp profile denies. Each field is "ok" when the
// call went through, or the name of its errno ("EPERM", "ENOSYS", ...).
type SeccompProbe struct {
	// IoUringSetup is io_uring_setup(1, params): what the profile exists
	// to refuse first.
	IoUringSetup string
	// Ptrace is ptrace(PTRACE_PEEKUSER) of the probe itself, which the
	// engine's default profile allows (on kernels from 4.8) and the kernel
	// then answers ESRCH (the probe is not traced). EPERM means a profile
	// refused it: the one asked for is in force. "" on an architecture the
	// probe has no number for.
	Ptrace string
}

// ProfileEnforced reports whether the probe shows agentbox's profile (or
// one as strict) at work, rather than a kernel or runtime that refuses
// io_uring on its own.
func (p SeccompProbe) ProfileEnforced() bool {
	return refused(p.IoUringSetup) && (p.Ptrace == "" || p.Ptrace == "EPERM")
}

// IoUringRefused reports whether io_uring_setup failed with EPERM or ENOSYS.
func (p SeccompProbe) IoUringRefused() bool { return refused(p.IoUringSetup) }

func refused(result string) bool { return result == "EPERM" || result == "ENOSYS" }

// seccompProbe prints one "name result" line per call. io_uring_setup is 425
// on every architecture; ptrace's number is not.
const seccompProbe = `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args)
    e = ctypes.get_errno()
    if r >= 0 and name == "io_uring_setup":
        os.close(r)
    print(name, "ok" if r >= 0 else errno.errorcode.get(e, e))
call("io_uring_setup", 425, 1, ctypes.create_string_buffer(120))
ptrace = {"x86_64": 101, "aarch64": 117}.get(os.uname().machine)
if ptrace:
    call("ptrace", ptrace, 3, os.getpid(), 0, 0)
`

// ProbeSeccomp runs the probe in a throwaway container of image shaped like
// a session's, with the seccomp profile seccomp (as the engine takes it: the
// JSON, "" for the engine's default, "unconfined") under the OCI runtime
// runtime ("" for the engine's default).
func ProbeSeccomp(ctx context.Context, cli *docker.Client, image, seccomp, runtime string) (SeccompProbe, error) {
	spec := LockedDown(image)
	spec.Entrypoint = []string{"python3", "-I", "-S", "-c", seccompProbe}
	spec.User, spec.CapAdd = "1000:1000", nil
	spec.Seccomp, spec.Runtime = seccomp, runtime
	out, err := runSpec(ctx, cli, spec)
	if err != nil {
		return SeccompProbe{}, fmt.Errorf("seccomp probe: %w", err)
	}
	var p SeccompProbe
	for line := range strings.Lines(out) {
		name, result, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch name {
		case "io_uring_setup":
			p.IoUringSetup = result
		case "ptrace":
			p.Ptrace = result
		}
	}
	if p.IoUringSetup == "" {
		return p, fmt.Errorf("seccomp probe: unexpected output %q", out)
	}
	return p, nil
}
