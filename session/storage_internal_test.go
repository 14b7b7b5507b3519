package session

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/config"
)

// TestStorageTroubleHidesHostPaths: what a caller (a server's tenant) is
// told about a failure of the server's own storage names what failed, and
// a full disk as such, but no host path: not ARTIFACTS_DB's, not
// BLOBSTORE_DIR's, wherever the cause put it. The cause stays reachable
// (errors.Is) for the operator's log. Before, the message was "disk full
// at <ARTIFACTS_DB>: ..." and the cause's text, paths and all.
func TestStorageTroubleHidesHostPaths(t *testing.T) {
	cfg := config.Default()
	cfg.ArtifactsDB = "/srv/secret-host/agentbox/artifacts.db"
	cfg.BlobstoreDir = "/srv/secret-host/agentbox/blobstore"
	cfg.SessionsRoot = "/srv/secret-host/agentbox/sessions"
	m := &Manager{cfg: cfg}
	blob := filepath.Join(cfg.BlobstoreDir, "ab", "cd", "tmp-123")
	for _, tt := range []struct {
		err  error
		what string
		full bool
		want string
	}{
		{&fs.PathError{Op: "write", Path: blob, Err: syscall.ENOSPC}, "the server's artifact store", true, "the server's artifact store: the server's disk is full"},
		{fmt.Errorf("record execution: database or disk is full (13) (SQLITE_FULL) in %s", cfg.ArtifactsDB), "the server's database", true, "the server's database: the server's disk is full"},
		{fmt.Errorf("place blob: %w", &fs.PathError{Op: "open", Path: blob, Err: syscall.EROFS}), "the server's artifact store", false, "open: read-only file system"},
		{fmt.Errorf("open database %s: unable to open database file", cfg.ArtifactsDB), "the server's database", false, "<ARTIFACTS_DB>"},
		{fmt.Errorf("mkdir %s/x: no such file or directory", cfg.SessionsRoot), "a session folder", false, "<SESSIONS_ROOT>/x"},
	} {
		se := m.storageTrouble(tt.err, tt.what)
		msg := se.Error()
		if strings.Contains(msg, "/srv/secret-host") {
			t.Errorf("%v: message %q shows a host path", tt.err, msg)
		}
		if !strings.HasPrefix(msg, tt.what) || !strings.Contains(msg, tt.want) {
			t.Errorf("%v: message %q, want it to start with %q and say %q", tt.err, msg, tt.what, tt.want)
		}
		if errors.Is(se, ErrStorageFull) != tt.full {
			t.Errorf("%v: errors.Is(ErrStorageFull) = %v, want %v", tt.err, !tt.full, tt.full)
		}
		if !errors.Is(se, tt.err) {
			t.Errorf("%v: the cause is not kept", tt.err)
		}
	}
}
