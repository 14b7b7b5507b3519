package session_test

import (
	"io/fs"
	"testing"

	"github.com/agentbox/agentbox/session"
)

// TestFileInfoKinds: a listed folder says it is one, through IsDir and
// FileMode's type bits, while Mode keeps the permission bits alone.
func TestFileInfoKinds(t *testing.T) {
	for _, tc := range []struct {
		typ   session.FileType
		isDir bool
		bits  fs.FileMode
	}{
		{session.TypeDir, true, fs.ModeDir},
		{session.TypeFile, false, 0},
		{session.TypeSymlink, false, fs.ModeSymlink},
		{session.TypeFIFO, false, fs.ModeNamedPipe},
	} {
		f := session.FileInfo{Path: "/session/x", Type: tc.typ, Mode: 0o755}
		if f.IsDir() != tc.isDir {
			t.Errorf("%s: IsDir %v, want %v", tc.typ, f.IsDir(), tc.isDir)
		}
		if got := f.FileMode(); got.Type() != tc.bits || got.Perm() != 0o755 || got.IsDir() != tc.isDir {
			t.Errorf("%s: FileMode %v, want type bits %v with 0755", tc.typ, got, tc.bits)
		}
	}
}
