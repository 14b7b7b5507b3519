package artifacts

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBatchPerFile runs a batch of many blobs through the fallback for
// systems without syncfs: an fsync per file and per folder.
func TestBatchPerFile(t *testing.T) {
	b := NewBlobstore(t.TempDir())
	existing, _, err := b.Put(t.Context(), strings.NewReader("blob 0"))
	if err != nil {
		t.Fatal(err)
	}
	bt := b.newBatch(true)
	want := map[string]string{existing: "blob 0"}
	for i := range 40 {
		c := fmt.Sprint("blob ", i%30) // 10 repeat one of the batch
		sha, _, err := bt.Put(t.Context(), strings.NewReader(c), 0)
		if err != nil {
			t.Fatal(err)
		}
		want[sha] = c
	}
	if err := bt.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	for sha, c := range want {
		if got, err := os.ReadFile(b.path(sha)); err != nil || string(got) != c {
			t.Errorf("blob %s = %q, %v; want %q", sha, got, err, c)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(b.dir, tmpDir)); len(left) != 0 {
		t.Errorf("left in tmp: %v", left)
	}
}

func TestSyncfsAvailable(t *testing.T) {
	ok := syncfsAvailable()
	t.Logf("syncfs available: %v", ok)
	if !ok {
		return
	}
	f, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syncfs(f); err != nil {
		t.Errorf("syncfs: %v", err)
	}
	if runtime.GOOS != "linux" {
		t.Errorf("syncfs available on %s", runtime.GOOS)
	}
}
