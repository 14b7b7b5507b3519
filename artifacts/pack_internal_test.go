package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

func hexSum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// readBlob reads a whole blob through Open.
func readBlob(t *testing.T, b *Blobstore, sha string) ([]byte, bool) {
	t.Helper()
	r, err := b.Open(sha)
	if err != nil {
		t.Fatalf("Open %s: %v", sha, err)
	}
	defer r.Close()
	_, own := r.(*os.File)
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return got, own
}

// dirNames lists a folder of the blobstore ("" when it does not exist).
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// packContents returns n small contents, a big one (past packMax) and the
// content at each edge of packMax.
func packContents(n int) [][]byte {
	var cs [][]byte
	for i := range n {
		cs = append(cs, fmt.Appendf(nil, "small blob %d\n", i))
	}
	cs = append(cs, bytes.Repeat([]byte("big "), packMax/2)) // 2 × packMax
	cs = append(cs, bytes.Repeat([]byte{'e'}, packMax))      // the largest packed
	cs = append(cs, bytes.Repeat([]byte{'f'}, packMax+1))    // the smallest not packed
	cs = append(cs, nil)                                     // empty
	return cs
}

// TestPackSmall follows a PackSmall batch through a crash before its pack is
// placed: the small blobs are durable in one pack, served by Open (from a
// new Blobstore too, as after a restart) and placed by Flush.
func TestPackSmall(t *testing.T) {
	dir := t.TempDir()
	b := NewBlobstore(dir)
	contents := packContents(100)

	// Content 0 is stored already, long ago: the batch refreshes it and
	// leaves it out of the pack.
	if _, _, err := b.Put(t.Context(), bytes.NewReader(contents[0])); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * DefaultGrace)
	if err := os.Chtimes(b.path(hexSum(contents[0])), old, old); err != nil {
		t.Fatal(err)
	}

	b.packs.hold = true // as if the process died right after Commit
	bt := b.NewBatch(PackSmall())
	for i, c := range append(contents, contents[:10]...) { // 10 repeats
		sha, size, err := bt.Put(t.Context(), bytes.NewReader(c), 0)
		if err != nil || sha != hexSum(c) || size != int64(len(c)) {
			t.Fatalf("Put %d = %s, %d, %v", i, sha, size, err)
		}
	}
	// One pack file and one temp file per big content, nothing visible.
	if tmp := dirNames(t, filepath.Join(dir, tmpDir)); len(tmp) != 3 {
		t.Errorf("tmp holds %v, want a pack and two big contents", tmp)
	}
	if _, err := b.Open(hexSum(contents[1])); !errors.Is(err, ErrBlobMissing) {
		t.Errorf("Open before Commit: %v, want ErrBlobMissing", err)
	}
	if err := bt.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}

	pending := dirNames(t, filepath.Join(dir, pendingDir))
	if len(pending) != 1 || !strings.HasPrefix(pending[0], packPrefix) {
		t.Fatalf("pending %v, want one pack", pending)
	}
	if tmp := dirNames(t, filepath.Join(dir, tmpDir)); len(tmp) != 0 {
		t.Errorf("tmp holds %v after Commit", tmp)
	}
	f, err := os.Open(filepath.Join(dir, pendingDir, pending[0]))
	if err != nil {
		t.Fatal(err)
	}
	table, err := readPackTable(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// 99 small, the packMax one and the empty one; not content 0, not the
	// two past packMax.
	if len(table) != 101 {
		t.Errorf("pack lists %d blobs, want 101", len(table))
	}
	if _, ok := table[hexSum(contents[0])]; ok {
		t.Error("the pack holds content stored already")
	}
	if fi, err := os.Stat(b.path(hexSum(contents[0]))); err != nil || fi.ModTime().Before(time.Now().Add(-time.Minute)) {
		t.Errorf("stored content not refreshed: %v %v", fi.ModTime(), err)
	}

	// A new process sees every blob: packed ones from the pack.
	again := NewBlobstore(dir)
	for _, bs := range []*Blobstore{b, again} {
		for i, c := range contents {
			got, own := readBlob(t, bs, hexSum(c))
			if !bytes.Equal(got, c) {
				t.Fatalf("blob %d: %d bytes, want %d", i, len(got), len(c))
			}
			if packed := len(c) <= packMax && i != 0; own == packed {
				t.Errorf("blob %d (%d bytes): served from its own file %v", i, len(c), own)
			}
		}
	}

	if err := again.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p := dirNames(t, filepath.Join(dir, pendingDir)); len(p) != 0 {
		t.Errorf("pending %v after Flush", p)
	}
	for i, c := range contents {
		got, err := os.ReadFile(b.path(hexSum(c)))
		if err != nil || !bytes.Equal(got, c) {
			t.Errorf("blob %d after Flush: %d bytes, %v", i, len(got), err)
		}
		if _, own := readBlob(t, b, hexSum(c)); !own {
			t.Errorf("blob %d: still served from a pack", i)
		}
	}
	// Nothing more to do, and GC finds every blob fresh.
	if err := b.Flush(t.Context()); err != nil {
		t.Error(err)
	}
	if n, err := b.GC(t.Context(), refSet{}); err != nil || n != 0 {
		t.Errorf("GC = %d, %v; want nothing removed", n, err)
	}
}

// TestPackPlacedInBackground: without a crash, Commit's pack is placed in
// the background; readers opening the blobs all along always get the right
// bytes, from the pack or from the blob's own file.
func TestPackPlacedInBackground(t *testing.T) {
	dir := t.TempDir()
	b := NewBlobstore(dir)
	contents := packContents(300)
	bt := b.NewBatch(PackSmall())
	for _, c := range contents {
		if _, _, err := bt.Put(t.Context(), bytes.NewReader(c), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := bt.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The placement runs now: read while it does.
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; ; i = (i + 4) % len(contents) {
				select {
				case <-stop:
					return
				default:
				}
				r, err := b.Open(hexSum(contents[i]))
				if err != nil {
					t.Errorf("Open during placement: %v", err)
					return
				}
				got, err := io.ReadAll(r)
				r.Close()
				if err != nil || !bytes.Equal(got, contents[i]) {
					t.Errorf("blob %d during placement: %d bytes, %v", i, len(got), err)
					return
				}
				reads.Add(1)
			}
		})
	}
	if err := b.Flush(t.Context()); err != nil {
		t.Error(err)
	}
	for reads.Load() < 1000 && !t.Failed() {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if p := dirNames(t, filepath.Join(dir, pendingDir)); len(p) != 0 {
		t.Errorf("pending %v after Flush", p)
	}
	for i, c := range contents {
		if got, err := os.ReadFile(b.path(hexSum(c))); err != nil || !bytes.Equal(got, c) {
			t.Errorf("blob %d: %d bytes, %v", i, len(got), err)
		}
	}
}

// TestPackFlushConcurrent: several processes placing the same pending
// packs at once (each Blobstore stands for one) all succeed.
func TestPackFlushConcurrent(t *testing.T) {
	dir := t.TempDir()
	b := NewBlobstore(dir)
	b.packs.hold = true
	contents := packContents(200)
	for batch := range 3 {
		bt := b.NewBatch(PackSmall())
		for _, c := range contents[batch*60:] {
			if _, _, err := bt.Put(t.Context(), bytes.NewReader(c), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := bt.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if p := dirNames(t, filepath.Join(dir, pendingDir)); len(p) != 3 {
		t.Fatalf("pending %v, want 3 packs", p)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := NewBlobstore(dir).Flush(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p := dirNames(t, filepath.Join(dir, pendingDir)); len(p) != 0 {
		t.Errorf("pending %v after Flush", p)
	}
	for i, c := range contents {
		if got, err := os.ReadFile(b.path(hexSum(c))); err != nil || !bytes.Equal(got, c) {
			t.Errorf("blob %d: %d bytes, %v", i, len(got), err)
		}
	}
	if tmp := dirNames(t, filepath.Join(dir, tmpDir)); len(tmp) != 0 {
		t.Errorf("tmp holds %v", tmp)
	}
}

// TestPackCorrupt: a pending pack damaged on disk places nothing wrong:
// Flush names it and leaves it, the sound packs are placed, and a blob whose
// bytes no longer match its name is never placed under it.
func TestPackCorrupt(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"no footer", func(t *testing.T, path string) {
			if err := os.Truncate(path, 10); err != nil {
				t.Fatal(err)
			}
		}},
		{"entries beyond the file", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			n := len(b) - packFooterSize
			copy(b[n:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			writeOver(t, path, b)
		}},
		{"offset out of bounds", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			entry := len(b) - packFooterSize - packEntrySize
			copy(b[entry+sha256Size:], []byte{0x7f, 0, 0, 0, 0, 0, 0, 0})
			writeOver(t, path, b)
		}},
		{"content changed", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			b[0] ^= 0xff
			writeOver(t, path, b)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b := NewBlobstore(dir)
			b.packs.hold = true
			good, bad := []byte("a sound pack"), []byte("a pack to damage")
			for _, content := range [][]byte{bad, good} {
				bt := b.NewBatch(PackSmall())
				if _, _, err := bt.Put(t.Context(), bytes.NewReader(content), 0); err != nil {
					t.Fatal(err)
				}
				if err := bt.Commit(t.Context()); err != nil {
					t.Fatal(err)
				}
				if content != nil && bytes.Equal(content, bad) {
					p := dirNames(t, filepath.Join(dir, pendingDir))
					c.damage(t, filepath.Join(dir, pendingDir, p[0]))
				}
			}
			if _, err := NewBlobstore(dir).Open(hexSum(bad)); !errors.Is(err, ErrBlobMissing) {
				t.Errorf("Open of the damaged pack's blob = %v, want ErrBlobMissing", err)
			}
			err := NewBlobstore(dir).Flush(t.Context())
			if !errors.Is(err, ErrCorruptPack) {
				t.Errorf("Flush = %v, want ErrCorruptPack", err)
			}
			if p := dirNames(t, filepath.Join(dir, pendingDir)); len(p) != 1 {
				t.Errorf("pending %v, want the damaged pack left", p)
			}
			if got, err := os.ReadFile(b.path(hexSum(good))); err != nil || !bytes.Equal(got, good) {
				t.Errorf("sound pack not placed: %q, %v", got, err)
			}
			if _, err := os.Stat(b.path(hexSum(bad))); err == nil {
				t.Error("a blob of the damaged pack was placed")
			}
		})
	}
}

func writeOver(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPackPutLimits: a packed Put honours max as an unpacked one does,
// reading at most max+1 bytes; a failing reader or a done context adds
// nothing; Abort leaves nothing.
func TestPackPutLimits(t *testing.T) {
	dir := t.TempDir()
	b := NewBlobstore(dir)
	bt := b.NewBatch(PackSmall())
	var tl *TooLargeError
	r := &countReader{r: strings.NewReader(strings.Repeat("x", 100))}
	if _, _, err := bt.Put(t.Context(), r, 10); !errors.As(err, &tl) || tl.Size != 11 || tl.Max != 10 {
		t.Errorf("Put of 100 bytes, max 10 = %v, want TooLargeError{11, 10}", err)
	}
	if r.n > 11 {
		t.Errorf("read %d bytes, want at most 11", r.n)
	}
	if _, _, err := bt.Put(t.Context(), strings.NewReader("0123456789"), 10); err != nil {
		t.Errorf("Put of exactly max: %v", err)
	}
	big := strings.Repeat("y", 2*packMax)
	if _, _, err := bt.Put(t.Context(), strings.NewReader(big), packMax+1); !errors.As(err, &tl) || tl.Max != packMax+1 {
		t.Errorf("Put of 2×packMax, max packMax+1 = %v", err)
	}
	errBoom := errors.New("boom")
	if _, _, err := bt.Put(t.Context(), io.MultiReader(strings.NewReader("part"), iotest.ErrReader(errBoom)), 0); !errors.Is(err, errBoom) {
		t.Errorf("Put of a failing reader = %v, want its error", err)
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := bt.Put(done, strings.NewReader("late"), 0); err == nil {
		t.Error("Put with a done context succeeded")
	}
	if tmp := dirNames(t, filepath.Join(dir, tmpDir)); len(tmp) != 1 {
		t.Errorf("tmp holds %v, want the pack only", tmp)
	}
	bt.Abort()
	if tmp := dirNames(t, filepath.Join(dir, tmpDir)); len(tmp) != 0 {
		t.Errorf("tmp holds %v after Abort", tmp)
	}
	if p := dirNames(t, filepath.Join(dir, pendingDir)); len(p) != 0 {
		t.Errorf("pending %v after Abort", p)
	}
}

type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestPackTornTemp: a pack whose batch died before Commit stays a temp file,
// never read, and GC removes it once older than Grace.
func TestPackTornTemp(t *testing.T) {
	dir := t.TempDir()
	b := NewBlobstore(dir)
	bt := b.NewBatch(PackSmall())
	content := []byte("never committed")
	if _, _, err := bt.Put(t.Context(), bytes.NewReader(content), 0); err != nil {
		t.Fatal(err)
	}
	// The process dies here: the batch is neither committed nor aborted.
	if _, err := b.Open(hexSum(content)); !errors.Is(err, ErrBlobMissing) {
		t.Errorf("Open of an uncommitted blob: %v", err)
	}
	old := time.Now().Add(-2 * DefaultGrace)
	for _, name := range dirNames(t, filepath.Join(dir, tmpDir)) {
		if err := os.Chtimes(filepath.Join(dir, tmpDir, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewBlobstore(dir).GC(t.Context(), refSet{}); err != nil {
		t.Fatal(err)
	}
	if tmp := dirNames(t, filepath.Join(dir, tmpDir)); len(tmp) != 0 {
		t.Errorf("tmp holds %v after GC", tmp)
	}
}

type oneArtifact Artifact

func (a oneArtifact) Get(_ context.Context, id string) (Artifact, error) {
	if id != a.ID {
		return Artifact{}, ErrNotFound
	}
	return Artifact(a), nil
}

// TestPackDownload: a blob still in its pack downloads like any other,
// ranges included.
func TestPackDownload(t *testing.T) {
	b := NewBlobstore(t.TempDir())
	b.packs.hold = true
	content := []byte("0123456789 packed, not placed yet")
	bt := b.NewBatch(PackSmall())
	for _, c := range [][]byte{[]byte("another blob first"), content} {
		if _, _, err := bt.Put(t.Context(), bytes.NewReader(c), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := bt.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	signer, err := NewSigner(Keys{Current: Key{Secret: bytes.Repeat([]byte("k"), MinSecretLen)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := oneArtifact{ID: "packed", Name: "p.txt", SHA256: hexSum(content), Size: int64(len(content)), MIME: "text/plain", Created: time.Now()}
	srv := httptest.NewServer(NewHandler(a, b, signer))
	defer srv.Close()
	url, _, err := signer.URL(srv.URL, a.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rng    string
		status int
		body   string
	}{
		{"", http.StatusOK, string(content)},
		{"bytes=3-5", http.StatusPartialContent, "345"},
		{"bytes=-6", http.StatusPartialContent, "placed yet"[4:]},
	} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if c.rng != "" {
			req.Header.Set("Range", c.rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || string(body) != c.body {
			t.Errorf("Range %q: %d %q, want %d %q", c.rng, resp.StatusCode, body, c.status, c.body)
		}
	}
}

// TestPackCommitsDuringFlush: batches commit (and start background
// placements) while other goroutines Flush over and over: nothing panics or
// hangs, a Flush bounded by its context returns in time, and in the end
// every blob is placed.
func TestPackCommitsDuringFlush(t *testing.T) {
	dir := t.TempDir()
	b := NewBlobstore(dir)
	stop := time.Now().Add(time.Second)
	var all sync.Map
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				bt := b.NewBatch(PackSmall())
				for j := range 5 {
					c := fmt.Appendf(nil, "writer %d batch %d blob %d", w, i, j)
					if _, _, err := bt.Put(t.Context(), bytes.NewReader(c), 0); err != nil {
						t.Error(err)
						return
					}
					all.Store(hexSum(c), c)
				}
				if err := bt.Commit(t.Context()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				start := time.Now()
				err := b.Flush(ctx)
				cancel()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Error(err)
				}
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("Flush took %v with a 2 s context", d)
				}
			}
		})
	}
	wg.Wait()
	if err := b.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p := dirNames(t, filepath.Join(dir, pendingDir)); len(p) != 0 {
		t.Errorf("pending %v after the last Flush", p)
	}
	n := 0
	all.Range(func(k, v any) bool {
		n++
		if got, err := os.ReadFile(b.path(k.(string))); err != nil || !bytes.Equal(got, v.([]byte)) {
			t.Errorf("blob %s: %q, %v", k, got, err)
		}
		return true
	})
	if n == 0 {
		t.Fatal("no batch committed")
	}
}
