package session

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/config"
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
	mountTmpfs(t, ws, "1m")
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

// TestReserveCountsBlobsInFlight: a new session's disk is allocated at
// once, while an ingestion or export may be writing what it took of the
// room above the reserve: the disk must count those bytes as gone, or
// the two together eat into DISK_RESERVE_MB.
func TestReserveCountsBlobsInFlight(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, "64m")
	m := &Manager{cfg: config.Config{SessionsRoot: dir, BlobstoreDir: dir, DiskReserveMB: 32}}
	room := m.blobRoom()
	if !m.takeBlobRoom(room, 24<<20) {
		t.Fatalf("24 MiB of a room of %d bytes", room)
	}
	if err := m.checkReserve(16 << 20); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("a 16 MiB disk while 24 MiB of artifacts are being written, 64 MiB free, 32 MiB reserve: %v, want ErrNoSpace", err)
	}
	m.giveBlobRoom(24 << 20)
	if err := m.checkReserve(16 << 20); err != nil {
		t.Fatalf("a 16 MiB disk once they are written: %v", err)
	}
}

// mountTmpfs mounts a tmpfs of size at dir for the test. Mounting needs
// root: without it the test is skipped, unless AGENTBOX_REQUIRE_DOCKER=1
// (CI, which runs as root, as BIND disks need), where it fails.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("AGENTBOX_REQUIRE_DOCKER") == "1" {
			t.Fatalf("mount a tmpfs at %s (root is required under AGENTBOX_REQUIRE_DOCKER=1): %v %s", dir, err, out)
		}
		t.Skipf("needs root to mount: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
}
