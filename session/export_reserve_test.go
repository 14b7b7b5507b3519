package session_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
)

// TestExportKeepsReserve: an export stores the file as an artifact, so it
// keeps DISK_RESERVE_MB free like an ingestion does; before, a file the
// sandbox made as large as its /session went into the blobstore whatever
// was left, as often as it was exported.
func TestExportKeepsReserve(t *testing.T) {
	blobs := t.TempDir()
	mountTmpfsRoot(t, blobs, "64m")
	const reserveMB = 32
	cfg := testConfig(t, func(c *config.Config) {
		c.BlobstoreDir = blobs
		c.DiskReserveMB = reserveMB
	})
	cfg.ExportDir = filepath.Join(t.TempDir(), "exports")
	m := managerFor(t, cfg, namespace())
	mustExec(t, m, "x", "import os\nos.makedirs('/session/data', exist_ok=True)\nopen('/session/data/big.bin', 'wb').write(os.urandom(40 << 20))")
	_, err := m.Export(context.Background(), "x", "/session/data/big.bin")
	var st syscall.Statfs_t
	if serr := syscall.Statfs(blobs, &st); serr != nil {
		t.Fatal(serr)
	}
	free := int64(st.Bavail) * st.Bsize >> 20
	if !errors.Is(err, session.ErrNoSpace) || free < reserveMB {
		t.Fatalf("a 40 MiB export with 32 MiB above a %d MiB reserve: %v, %d MiB left free; want ErrNoSpace and the reserve kept", reserveMB, err, free)
	}
	if ents, _ := os.ReadDir(cfg.ExportDir); len(ents) != 0 {
		t.Fatalf("a refused export left %d files in EXPORT_DIR", len(ents))
	}
}
