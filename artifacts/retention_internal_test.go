package artifacts

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// refSet is a Referencer over a fixed set that a test may change.
type refSet map[string]bool

func (r refSet) Referenced(_ context.Context, sha string) (bool, error) { return r[sha], nil }

// TestGCRace stages what GC's rename-then-recheck protects against: after GC
// judged a blob unreferenced and old, and before it moves it away, a
// concurrent ingestion Puts the same content (touching the blob) or adds a
// row for it. The blob must survive both.
func TestGCRace(t *testing.T) {
	tests := []struct {
		name  string
		race  func(t *testing.T, b *Blobstore, refs refSet, sha string)
		kept  bool
		count int
	}{
		{"nothing happens", func(*testing.T, *Blobstore, refSet, string) {}, false, 1},
		{"Put of the same content", func(t *testing.T, b *Blobstore, _ refSet, _ string) {
			if _, _, err := b.Put(t.Context(), strings.NewReader("content")); err != nil {
				t.Fatal(err)
			}
		}, true, 0},
		{"row added", func(_ *testing.T, _ *Blobstore, refs refSet, sha string) { refs[sha] = true }, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBlobstore(t.TempDir())
			sha, _, err := b.Put(t.Context(), strings.NewReader("content"))
			if err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-2 * DefaultGrace)
			if err := os.Chtimes(b.path(sha), old, old); err != nil {
				t.Fatal(err)
			}
			refs := refSet{}
			b.gcHook = func(s string) { tt.race(t, b, refs, s) }
			n, err := b.GC(t.Context(), refs)
			if err != nil || n != tt.count {
				t.Errorf("GC = %d, %v; want %d", n, err, tt.count)
			}
			if _, err := os.Stat(b.path(sha)); (err == nil) != tt.kept {
				t.Errorf("blob stat: %v, want kept %v", err, tt.kept)
			}
			if left, _ := os.ReadDir(filepath.Join(b.dir, tmpDir)); len(left) != 0 {
				t.Errorf("left in tmp: %v", left)
			}
		})
	}
}

// TestGCRestoresAfterCrash checks that a blob a crashed GC left in tmp goes
// back under its name.
func TestGCRestoresAfterCrash(t *testing.T) {
	b := NewBlobstore(t.TempDir())
	sha, _, err := b.Put(t.Context(), strings.NewReader("content"))
	if err != nil {
		t.Fatal(err)
	}
	trash := filepath.Join(b.dir, tmpDir, gcPrefix+sha+"-x")
	if err := os.Rename(b.path(sha), trash); err != nil {
		t.Fatal(err)
	}
	if n, err := b.GC(t.Context(), refSet{sha: true}); err != nil || n != 0 {
		t.Errorf("GC = %d, %v", n, err)
	}
	if _, err := os.Stat(b.path(sha)); err != nil {
		t.Errorf("blob not restored: %v", err)
	}
}

// TestNewID: ids are 26 lowercase base32hex characters, distinct, and sort
// by their millisecond.
func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for i := range 20000 {
		id := newID()
		if len(id) != 26 || strings.ToLower(id) != id || strings.Trim(id, "0123456789abcdefghijklmnopqrstuv") != "" {
			t.Fatalf("id %q", id)
		}
		if seen[id] {
			t.Fatalf("id %q twice", id)
		}
		seen[id] = true
		if i%1000 == 0 {
			time.Sleep(2 * time.Millisecond)
			if id[:9] < prev {
				t.Errorf("id %q sorts before the earlier %q", id, prev)
			}
			prev = id[:9]
		}
	}
}
