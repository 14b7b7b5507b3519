package session_test

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
)

// TestSessionLogKeepsReserve: a BIND session's session.log is on the host,
// beside its disk, not on it: each execution appends its code and output
// there. Past DISK_RESERVE_MB it is not written (the execution history in
// the database keeps them), or a session printing in a loop takes, through
// its log, the space its disk limit kept from it.
func TestSessionLogKeepsReserve(t *testing.T) {
	root := t.TempDir()
	mountTmpfsRoot(t, root, "96m")
	const reserveMB = 70
	cfg := testConfig(t, func(c *config.Config) {
		bindDisk(16)(c)
		c.SessionsRoot = root
		c.DiskReserveMB = reserveMB
	})
	m := managerFor(t, cfg, namespace())
	for range 16 {
		mustExec(t, m, "k", "print('x' * (1 << 20))")
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(root, &st); err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bavail) * st.Bsize >> 20; free < reserveMB {
		t.Fatalf("16 executions printing 1 MiB each: %d MiB left free on SESSIONS_ROOT, under DISK_RESERVE_MB=%d", free, reserveMB)
	}
}

// mountTmpfsRoot mounts a tmpfs of size at dir for the test: a small file
// system to fill. Mounting needs root: without it the test is skipped,
// unless AGENTBOX_REQUIRE_DOCKER=1 (CI, which runs as root, as BIND disks
// need), where it fails.
func mountTmpfsRoot(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv(dockertest.RequireEnv) == "1" {
			t.Fatalf("mount a tmpfs at %s (root is required under %s=1): %v %s", dir, dockertest.RequireEnv, err, out)
		}
		t.Skipf("needs root to mount a small file system: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
}
