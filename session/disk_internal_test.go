package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestMountsUnderSymlinkedRoot: the sweep finds the disks a dead process
// left mounted by reading the mount table, which names real paths; a
// SESSIONS_ROOT reached through a link (/data -> /mnt/disk1) must still
// find them, or they stay mounted, with their loop devices, until reboot.
func TestMountsUnderSymlinkedRoot(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	ws := filepath.Join(real, "sid", WorkspaceDir)
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", ws).CombinedOutput(); err != nil {
		t.Skipf("needs root to mount: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", ws).Run() })
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join("sid", WorkspaceDir)
	if got := mountsUnder(real); !slices.Contains(got, want) {
		t.Fatalf("mountsUnder(real root) = %v, want %s in it", got, want)
	}
	if got := mountsUnder(link); !slices.Contains(got, want) {
		t.Fatalf("mountsUnder(a root reached through a link) = %v, want %s in it", got, want)
	}
}
