package artifacts_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
)

// noRefs is a Referencer for which no blob is referenced: GC removes every
// blob older than Grace.
type noRefs struct{}

func (noRefs) Referenced(context.Context, string) (bool, error) { return false, nil }

// blobPaths returns the relative, slash-separated file names of the blobs of
// the contents, sorted and without duplicates, as files returns them.
func blobPaths(contents ...[]byte) []string {
	var ps []string
	for _, c := range contents {
		s := sum(c)
		ps = append(ps, s[:2]+"/"+s[2:4]+"/"+s)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// checkBlobs fails unless the blobs under dir are exactly those of the
// contents, with the right bytes, and no temp file is left.
func checkBlobs(t *testing.T, dir string, contents ...[]byte) {
	t.Helper()
	blobs, temps := files(t, dir)
	slices.Sort(blobs)
	if want := blobPaths(contents...); !slices.Equal(blobs, want) {
		t.Errorf("blobs %v, want %v", blobs, want)
	}
	if len(temps) != 0 {
		t.Errorf("temp files left: %v", temps)
	}
	for _, c := range contents {
		got, err := os.ReadFile(filepath.Join(dir, blobPaths(c)[0]))
		if err != nil || !bytes.Equal(got, c) {
			t.Errorf("blob of %.20q = %.20q, %v", c, got, err)
		}
	}
}

func TestBatch(t *testing.T) {
	dir := t.TempDir()
	bs := artifacts.NewBlobstore(dir)
	// 100 Puts of 70 contents: 30 repeat one of the batch.
	content := func(i int) []byte { return fmt.Appendf(nil, "blob %d\n", i%70) }
	var all [][]byte
	for i := range 70 {
		all = append(all, content(i))
	}

	// Contents 0 to 9 are stored already, with a time GC would act on.
	old := time.Now().Add(-2 * artifacts.DefaultGrace).Truncate(time.Second)
	for i := range 10 {
		sha, _, err := bs.Put(t.Context(), bytes.NewReader(content(i)))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := bs.Path(sha)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}

	bt := bs.NewBatch()
	defer bt.Abort()
	for i := range 100 {
		c := content(i)
		sha, size, err := bt.Put(t.Context(), bytes.NewReader(c), 0)
		if err != nil || sha != sum(c) || size != int64(len(c)) {
			t.Fatalf("Put %d = %s, %d, %v; want %s, %d", i, sha, size, err, sum(c), len(c))
		}
	}
	// Nothing new is visible before Commit; the batch holds one temp file
	// per content.
	blobs, temps := files(t, dir)
	if len(blobs) != 10 || len(temps) != 70 {
		t.Errorf("before Commit: %d blobs, %d temp files; want 10, 70", len(blobs), len(temps))
	}
	if _, err := bs.Open(sum(content(10))); !errors.Is(err, artifacts.ErrBlobMissing) {
		t.Errorf("Open before Commit: %v, want ErrBlobMissing", err)
	}

	start := time.Now().Add(-time.Second) // file times may be coarser than the clock
	if err := bt.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkBlobs(t, dir, all...)
	for i, c := range all {
		p, _ := bs.Path(sum(c))
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		// Deduplicated and new blobs alike: GC's grace counts from Commit.
		if fi.ModTime().Before(start) {
			t.Errorf("blob %d: time %v, want Commit's", i, fi.ModTime())
		}
		if perm := fi.Mode().Perm(); perm&0o222 != 0 || perm&0o007 != 0 {
			t.Errorf("blob %d: mode %v, want read-only, nothing for others", i, perm)
		}
	}

	// The batch is spent: Abort leaves the blobs alone.
	if err := bt.Commit(t.Context()); err == nil {
		t.Error("second Commit succeeded")
	}
	if _, _, err := bt.Put(t.Context(), strings.NewReader("late"), 0); err == nil {
		t.Error("Put after Commit succeeded")
	}
	bt.Abort()
	checkBlobs(t, dir, all...)
}

func TestBatchAbort(t *testing.T) {
	dir := t.TempDir()
	bs := artifacts.NewBlobstore(dir)
	bt := bs.NewBatch()
	for i := range 5 {
		if _, _, err := bt.Put(t.Context(), strings.NewReader(fmt.Sprint("blob ", i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	bt.Abort()
	bt.Abort()
	checkBlobs(t, dir)
	if _, _, err := bt.Put(t.Context(), strings.NewReader("late"), 0); err == nil {
		t.Error("Put after Abort succeeded")
	}
	if err := bt.Commit(t.Context()); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	checkBlobs(t, dir)

	// An empty batch commits nothing, without error.
	if err := bs.NewBatch().Commit(t.Context()); err != nil {
		t.Errorf("Commit of an empty batch: %v", err)
	}
	checkBlobs(t, dir)
}

func TestBatchCommitCancelled(t *testing.T) {
	errBoom := errors.New("boom")
	ctx, cancel := context.WithCancelCause(t.Context())
	dir := t.TempDir()
	bt := artifacts.NewBlobstore(dir).NewBatch()
	if _, _, err := bt.Put(ctx, strings.NewReader("content"), 0); err != nil {
		t.Fatal(err)
	}
	cancel(errBoom)
	if err := bt.Commit(ctx); !errors.Is(err, errBoom) {
		t.Errorf("Commit = %v, want the cause", err)
	}
	checkBlobs(t, dir)
}

// TestBatchPutFailure checks that a failing Put leaves nothing and spoils
// nothing: the batch's other blobs commit.
func TestBatchPutFailure(t *testing.T) {
	errBoom := errors.New("boom")
	cancelled, cancel := context.WithCancelCause(t.Context())
	cancel(errBoom)
	dir := t.TempDir()
	bs := artifacts.NewBlobstore(dir)
	bt := bs.NewBatch()
	defer bt.Abort()

	a, b := []byte("first"), []byte("last")
	big := bytes.Repeat([]byte{'x'}, 3<<20)
	put := func(ctx context.Context, r io.Reader, max int64) error {
		_, _, err := bt.Put(ctx, r, max)
		return err
	}
	if err := put(t.Context(), bytes.NewReader(a), 0); err != nil {
		t.Fatal(err)
	}
	if err := put(t.Context(), &failingReader{3 << 20, errBoom}, 0); !errors.Is(err, errBoom) {
		t.Errorf("Put of a failing reader = %v, want its error", err)
	}
	if err := put(cancelled, bytes.NewReader([]byte("data")), 0); !errors.Is(err, errBoom) {
		t.Errorf("Put with a done context = %v, want the cause", err)
	}
	var tl *artifacts.TooLargeError
	if err := put(t.Context(), bytes.NewReader(big), 1<<20); !errors.As(err, &tl) || tl.Size != 1<<20+1 || tl.Max != 1<<20 {
		t.Errorf("Put of 3 MiB, max 1 MiB = %v, want TooLargeError{%d, %d}", err, 1<<20+1, 1<<20)
	}
	if err := put(t.Context(), bytes.NewReader(big), int64(len(big))); err != nil {
		t.Errorf("Put of exactly max bytes: %v", err)
	}
	if err := put(t.Context(), bytes.NewReader(b), 0); err != nil {
		t.Fatal(err)
	}
	if _, temps := files(t, dir); len(temps) != 3 {
		t.Errorf("temp files %v, want those of the 3 good Puts", temps)
	}
	if err := bt.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkBlobs(t, dir, a, big, b)
}

// TestBatchConcurrent commits batches of the same contents concurrently, and
// Puts into one batch from many goroutines.
func TestBatchConcurrent(t *testing.T) {
	var contents [][]byte
	for i := range 20 {
		contents = append(contents, bytes.Repeat(fmt.Appendf(nil, "content %d ", i), 1000*(i+1)))
	}

	t.Run("batches", func(t *testing.T) {
		dir := t.TempDir()
		bs := artifacts.NewBlobstore(dir)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				bt := bs.NewBatch()
				defer bt.Abort()
				for _, c := range contents {
					if sha, _, err := bt.Put(t.Context(), bytes.NewReader(c), 0); err != nil || sha != sum(c) {
						t.Errorf("Put = %s, %v", sha, err)
						return
					}
				}
				if err := bt.Commit(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		checkBlobs(t, dir, contents...)
	})

	t.Run("one batch", func(t *testing.T) {
		dir := t.TempDir()
		bt := artifacts.NewBlobstore(dir).NewBatch()
		defer bt.Abort()
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				for _, c := range contents {
					if sha, _, err := bt.Put(t.Context(), bytes.NewReader(c), 0); err != nil || sha != sum(c) {
						t.Errorf("Put = %s, %v", sha, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if _, temps := files(t, dir); len(temps) != len(contents) {
			t.Errorf("%d temp files, want one per content, %d", len(temps), len(contents))
		}
		if err := bt.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		checkBlobs(t, dir, contents...)
	})
}

// TestBatchGC runs GC while a batch is between its Puts and its Commit, and
// during its Commit: GC must spare the batch's temp files (they are fresh)
// and every blob Commit places, including one whose old copy GC removed
// before Commit.
func TestBatchGC(t *testing.T) {
	dir := t.TempDir()
	bs := artifacts.NewBlobstore(dir)
	stale := []byte("stored long ago, referenced by nothing")
	sha, _, err := bs.Put(t.Context(), bytes.NewReader(stale))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := bs.Path(sha)
	old := time.Now().Add(-2 * artifacts.DefaultGrace)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}

	contents := [][]byte{stale}
	for i := range 50 {
		contents = append(contents, fmt.Appendf(nil, "new %d", i))
	}
	bt := bs.NewBatch()
	defer bt.Abort()
	for _, c := range contents {
		if _, _, err := bt.Put(t.Context(), bytes.NewReader(c), 0); err != nil {
			t.Fatal(err)
		}
	}

	// Between the Puts and Commit: the stale blob goes, the temp files stay.
	if n, err := bs.GC(t.Context(), noRefs{}); err != nil || n != 1 {
		t.Errorf("GC = %d, %v; want the stale blob removed", n, err)
	}
	if blobs, temps := files(t, dir); len(blobs) != 0 || len(temps) != len(contents) {
		t.Errorf("after GC: blobs %v, %d temp files; want none, %d", blobs, len(temps), len(contents))
	}

	// During Commit.
	stop := make(chan struct{})
	var gcs atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := bs.GC(t.Context(), noRefs{}); err != nil {
				t.Error(err)
			}
			gcs.Add(1)
		}
	})
	for gcs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	err = bt.Commit(t.Context())
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := bs.GC(t.Context(), noRefs{}); err != nil || n != 0 {
		t.Errorf("GC after Commit = %d, %v; want nothing removed", n, err)
	}
	checkBlobs(t, dir, contents...)
}

// TestBatchOlderThanGrace checks that a batch committed too late, after GC
// removed its temp files, fails rather than commit half of it.
func TestBatchOlderThanGrace(t *testing.T) {
	dir := t.TempDir()
	bs := artifacts.NewBlobstore(dir)
	bs.Grace = time.Millisecond
	bt := bs.NewBatch()
	for i := range 3 {
		if _, _, err := bt.Put(t.Context(), strings.NewReader(fmt.Sprint("blob ", i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := bs.GC(t.Context(), noRefs{}); err != nil {
		t.Fatal(err)
	}
	if err := bt.Commit(t.Context()); err == nil {
		t.Error("Commit after GC removed the temp files succeeded")
	}
	checkBlobs(t, dir)
}
