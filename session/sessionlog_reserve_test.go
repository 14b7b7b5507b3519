package session_test

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/config"
)

// TestSessionLogKeepsReserve: a BIND session's session.log is on the host,
// beside its disk, not on it: each execution appends its code and output
// there. Past DISK_RESERVE_MB it is not written (the execution history in
// the database keeps them), or a session printing in a loop takes, through
// its log, the space its disk limit kept from it.
func TestSessionLogKeepsReserve(t *testing.T) {
	root := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", root).CombinedOutput(); err != nil {
		t.Skipf("needs root to mount a small file system for SESSIONS_ROOT: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", root).Run() })
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
