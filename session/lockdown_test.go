package session_test

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
)

// TestLockedDownByDefault runs hostile code in one default session and checks
// that each protection holds, by what the code observes from inside.
func TestLockedDownByDefault(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_SECRET", "hunter2")
	m := newManager(t, nil)
	// gvisor is what Debian's runsc (0.0~20221219) shows instead, where it
	// differs (README, Security, gVisor).
	cases := []struct {
		name, code, want, gvisor string
	}{
		// No network means no interface but loopback: a refused or timed
		// out connection alone would pass on an internal network too
		// (an eth0 with no way out).
		{"no interface but loopback", `
import os, socket
names = {n for _, n in socket.if_nameindex()}
if os.path.isdir("/sys/class/net"):
    names |= set(os.listdir("/sys/class/net"))
print(" ".join(sorted(names)))`, "lo", ""},
		{"manager env not visible", `import os; print(os.environ.get("AGENTBOX_TEST_SECRET", "absent"))`, "absent", ""},
		{"not root", `import os; print(os.getuid(), os.geteuid())`, "1000 1000", ""},
		{"usr read-only", `
try:
    open("/usr/evil", "w")
    print("wrote")
except OSError as e:
    print("refused", e.errno)`, "refused 30", "refused 13"},
		// The code's own sets are empty for any non-root user, whatever the
		// container got; what the container got shows in PID 1 (the init,
		// root), whose bounding set is the container's: exactly SETUID,
		// SETGID, KILL and SETPCAP, nothing of the engine's defaults.
		{"no capabilities", `
def caps(pid):
    return " ".join(l.split()[1] for l in open(f"/proc/{pid}/status") if l.split(":")[0] in ("CapPrm", "CapEff", "CapBnd"))
print(caps("self"), "|", caps(1))`, "0000000000000000 0000000000000000 0000000000000000 | 00000000000001e0 00000000000001e0 00000000000001e0", ""},
		// prctl(PR_GET_NO_NEW_PRIVS): gVisor's /proc/self/status has no
		// NoNewPrivs line.
		{"no new privileges", `import ctypes; print(ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))`, "1", ""},
		{"no engine socket", `import os; print(os.path.exists("/var/run/docker.sock"), os.path.exists("/run/docker.sock"))`, "False False", ""},
		{"memory limit", `
import os
for p in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    if os.path.exists(p):
        print(int(open(p).read()) >> 20)
        break
else:
    # gVisor shows no cgroup files; its /proc/meminfo's total is the limit.
    print(int(open("/proc/meminfo").readline().split()[1]) >> 10)`, "1408", ""}, // 1024 for processes + files in memory apart: /session (64 here), /tmp (256), /dev/shm (64)
		{"pids limit", `
import os
for p in ("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"):
    if os.path.exists(p):
        print(open(p).read().strip())
        break
else:
    print("not shown")`, "256", "not shown"},
		{"session writable", `open("/session/f.txt", "w").write("ok"); print(open("/session/f.txt").read())`, "ok", ""},
		{"tmp writable", `open("/tmp/f.txt", "w").write("ok"); print(open("/tmp/f.txt").read())`, "ok", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := mustExec(t, m, "hostile", c.code)
			if res.Error != nil {
				t.Fatalf("raised: %+v\n%s", res.Error, res.Stderr)
			}
			want := c.want
			if dockertest.IsGVisor() && c.gvisor != "" {
				want = c.gvisor
			}
			if got := strings.TrimSpace(res.Stdout); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

// TestEnvPassthroughOnlyNamed shows that a named variable reaches the
// sandbox and that nothing else does.
func TestEnvPassthroughOnlyNamed(t *testing.T) {
	t.Setenv("ABX_TEST_PASS", "visible")
	t.Setenv("ABX_TEST_HIDDEN", "hidden")
	m := newManager(t, func(c *config.Config) { c.EnvPassthrough = []string{"ABX_TEST_PASS"} })
	res := mustExec(t, m, "env", `import os; print(os.environ.get("ABX_TEST_PASS"), os.environ.get("ABX_TEST_HIDDEN"))`)
	if got := strings.TrimSpace(res.Stdout); got != "visible None" {
		t.Fatalf("got %q", got)
	}
}
