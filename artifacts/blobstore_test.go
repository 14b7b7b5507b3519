package artifacts_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/artifacts"
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// files returns the files under dir, relative and slash-separated, split into
// blobs and temp files.
func files(t *testing.T, dir string) (blobs, temps []string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "tmp/") {
			temps = append(temps, rel)
		} else {
			blobs = append(blobs, rel)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return blobs, temps
}

func TestPutLayout(t *testing.T) {
	dir := t.TempDir()
	bs := artifacts.NewBlobstore(dir)
	content := []byte("a,b\n1,2\n")
	sha, size, err := bs.Put(t.Context(), bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	if sha != sum(content) || size != int64(len(content)) {
		t.Errorf("Put = %s, %d; want %s, %d", sha, size, sum(content), len(content))
	}
	want := filepath.Join(dir, sha[:2], sha[2:4], sha)
	if p, err := bs.Path(sha); err != nil || p != want {
		t.Errorf("Path = %q, %v; want %q", p, err, want)
	}
	got, err := os.ReadFile(want)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("blob file = %q, %v; want %q", got, err, content)
	}
	if fi, err := os.Stat(want); err != nil || fi.Mode().Perm()&0o222 != 0 || fi.Mode().Perm()&0o007 != 0 {
		t.Errorf("blob mode = %v, %v; want read-only, nothing for others", fi.Mode(), err)
	}
	f, err := bs.Open(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, _ := io.ReadAll(f); !bytes.Equal(got, content) {
		t.Errorf("Open read %q, want %q", got, content)
	}
	if _, temps := files(t, dir); len(temps) != 0 {
		t.Errorf("temp files left: %v", temps)
	}

	if err := bs.Remove(sha); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Open(sha); !errors.Is(err, artifacts.ErrBlobMissing) {
		t.Errorf("Open after Remove: %v, want ErrBlobMissing", err)
	}
	if err := bs.Remove(sha); err != nil {
		t.Errorf("Remove of a missing blob: %v, want nil", err)
	}
}

func TestPutEmpty(t *testing.T) {
	bs := artifacts.NewBlobstore(t.TempDir())
	sha, size, err := bs.Put(t.Context(), strings.NewReader(""))
	if err != nil || size != 0 || sha != sum(nil) {
		t.Errorf("Put(empty) = %s, %d, %v; want %s, 0", sha, size, err, sum(nil))
	}
}

func TestBadSHA(t *testing.T) {
	dir := t.TempDir()
	bs := artifacts.NewBlobstore(filepath.Join(dir, "blobs"))
	good := sum([]byte("x"))
	for _, sha := range []string{
		"",
		"../../etc/passwd",
		"../" + good[3:],
		good[:62] + "/x",
		strings.ToUpper(good),
		good[:63],
		good + "0",
		strings.Repeat("g", 64),
		good[:63] + "\x00",
	} {
		if _, err := bs.Open(sha); !errors.Is(err, artifacts.ErrInvalidSHA256) {
			t.Errorf("Open(%q) = %v, want ErrInvalidSHA256", sha, err)
		}
		if _, err := bs.Path(sha); !errors.Is(err, artifacts.ErrInvalidSHA256) {
			t.Errorf("Path(%q) = %v, want ErrInvalidSHA256", sha, err)
		}
		if err := bs.Remove(sha); !errors.Is(err, artifacts.ErrInvalidSHA256) {
			t.Errorf("Remove(%q) = %v, want ErrInvalidSHA256", sha, err)
		}
	}
	if _, err := bs.Open(good); !errors.Is(err, artifacts.ErrBlobMissing) {
		t.Errorf("Open(missing) = %v, want ErrBlobMissing", err)
	}
}

// failingReader yields n bytes, then fails with err.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n, 1000)
	for i := range k {
		p[i] = byte(r.n - i)
	}
	r.n -= k
	return k, nil
}

func TestPutFailureLeavesNothing(t *testing.T) {
	errBoom := errors.New("boom")
	cancelled, cancel := context.WithCancelCause(t.Context())
	cancel(errBoom)
	tests := []struct {
		name string
		ctx  context.Context
		r    io.Reader
		max  int64
	}{
		{"reader fails at once", t.Context(), &failingReader{0, errBoom}, -1},
		{"reader fails mid-stream", t.Context(), &failingReader{3 << 20, errBoom}, -1},
		{"context done", cancelled, strings.NewReader("data"), -1},
		{"too large", t.Context(), &failingReader{3 << 20, io.EOF}, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			bs := artifacts.NewBlobstore(dir)
			_, _, err := bs.PutLimit(tt.ctx, tt.r, tt.max)
			var tl *artifacts.TooLargeError
			if !errors.Is(err, errBoom) && !errors.As(err, &tl) {
				t.Errorf("Put error = %v, want the cause", err)
			}
			blobs, temps := files(t, dir)
			if len(blobs)+len(temps) != 0 {
				t.Errorf("left blobs %v and temp files %v", blobs, temps)
			}
		})
	}
}

// countingReader counts the bytes read from an endless stream.
type countingReader struct{ n int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	r.n += int64(len(p))
	return len(p), nil
}

func TestPutLimit(t *testing.T) {
	tests := []struct {
		size, max int64
		tooLarge  bool
	}{
		{0, 0, false},
		{1, 0, true},
		{10, 10, false},
		{11, 10, true},
		{5 << 20, 5 << 20, false},
		{5<<20 + 1, 5 << 20, true},
		{100, -1, false}, // no limit
	}
	for _, tt := range tests {
		bs := artifacts.NewBlobstore(t.TempDir())
		content := bytes.Repeat([]byte{'x'}, int(tt.size))
		sha, size, err := bs.PutLimit(t.Context(), bytes.NewReader(content), tt.max)
		var tl *artifacts.TooLargeError
		switch {
		case tt.tooLarge && (!errors.As(err, &tl) || tl.Max != tt.max || tl.Size != tt.max+1):
			t.Errorf("PutLimit(%d bytes, %d) = %v, want TooLargeError{%d, %d}", tt.size, tt.max, err, tt.max+1, tt.max)
		case !tt.tooLarge && (err != nil || size != tt.size || sha != sum(content)):
			t.Errorf("PutLimit(%d bytes, %d) = %s, %d, %v", tt.size, tt.max, sha, size, err)
		}
	}

	// An endless reader is read no further than max+1 bytes.
	bs := artifacts.NewBlobstore(t.TempDir())
	r := &countingReader{}
	_, _, err := bs.PutLimit(t.Context(), r, 3<<20+5)
	var tl *artifacts.TooLargeError
	if !errors.As(err, &tl) || r.n != 3<<20+6 {
		t.Errorf("endless reader: err %v after reading %d bytes, want TooLargeError after %d", err, r.n, 3<<20+6)
	}
}

func TestPutConcurrentSameContent(t *testing.T) {
	dir := t.TempDir()
	bs := artifacts.NewBlobstore(dir)
	ix := artifacts.NewIndex(openStore(t))
	content := bytes.Repeat([]byte("same content "), 100_000)
	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sha, size, err := bs.Put(t.Context(), bytes.NewReader(content))
			if err != nil {
				t.Error(err)
				return
			}
			a, err := ix.Add(t.Context(), artifacts.Artifact{Namespace: "ns",
				SessionID: "s" + string(rune('a'+i)), Name: "out.txt", SHA256: sha, Size: size})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = a.ID
		})
	}
	wg.Wait()
	blobs, temps := files(t, dir)
	if len(blobs) != 1 || len(temps) != 0 {
		t.Errorf("blobs %v, temp files %v; want one blob, no temp file", blobs, temps)
	}
	seen := map[string]bool{}
	for i, id := range ids {
		a, err := ix.Get(t.Context(), id)
		if err != nil || a.SHA256 != sum(content) || seen[id] {
			t.Errorf("row %d: %+v, %v (duplicate id: %v)", i, a, err, seen[id])
		}
		seen[id] = true
	}
	if got, _ := os.ReadFile(filepath.Join(dir, blobs[0])); !bytes.Equal(got, content) {
		t.Error("blob content differs")
	}
}
