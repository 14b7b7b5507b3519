package artifacts_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
)

// age sets a file's modification time to d ago.
func age(t *testing.T, file string, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	if err := os.Chtimes(file, old, old); err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, bs *artifacts.Blobstore, content string) string {
	t.Helper()
	sha, _, err := bs.Put(t.Context(), strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

func exists(bs *artifacts.Blobstore, sha string) bool {
	f, err := bs.Open(sha)
	if err == nil {
		f.Close()
	}
	return err == nil
}

func TestDeleteSessionAndPrune(t *testing.T) {
	ctx := t.Context()
	ix := artifacts.NewIndex(openStore(t))
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for i, row := range []struct{ sess, name string }{
		{"a", "1"}, {"a", "2"}, {"b", "1"}, {"b", "2"}, {"b", "3"},
	} {
		if _, err := ix.Add(ctx, artifacts.Artifact{Namespace: "ns", SessionID: row.sess, Name: row.name,
			SHA256: sum([]byte(row.name)), Created: t0.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := ix.DeleteSession(ctx, "ns", "a"); err != nil || n != 2 {
		t.Errorf("DeleteSession = %d, %v; want 2", n, err)
	}
	if n, err := ix.DeleteSession(ctx, "other", "b"); err != nil || n != 0 {
		t.Errorf("DeleteSession(other namespace) = %d, %v; want 0", n, err)
	}
	// b's rows were created at t0+2h, +3h, +4h.
	if n, err := ix.Prune(ctx, t0.Add(3*time.Hour)); err != nil || n != 1 {
		t.Errorf("Prune = %d, %v; want 1", n, err)
	}
	if list, _ := ix.BySession(ctx, "ns", "b"); len(list) != 2 {
		t.Errorf("after Prune: %d rows, want 2", len(list))
	}
	if list, _ := ix.BySession(ctx, "ns", "a"); len(list) != 0 {
		t.Errorf("after DeleteSession: %d rows, want 0", len(list))
	}
}

func TestGC(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	bs := artifacts.NewBlobstore(dir)
	ix := artifacts.NewIndex(openStore(t))

	if n, err := bs.GC(ctx, ix); err != nil || n != 0 {
		t.Errorf("GC of a new directory = %d, %v", n, err)
	}

	referencedOld := put(t, bs, "referenced, old")
	if _, err := ix.Add(ctx, artifacts.Artifact{Namespace: "ns", SessionID: "s", Name: "r", SHA256: referencedOld}); err != nil {
		t.Fatal(err)
	}
	unreferencedOld := put(t, bs, "unreferenced, old")
	unreferencedNew := put(t, bs, "unreferenced, new: Put done, Add pending")
	deduped := put(t, bs, "old, then put again")
	for _, sha := range []string{referencedOld, unreferencedOld, deduped} {
		p, _ := bs.Path(sha)
		age(t, p, 2*time.Hour)
	}
	if put(t, bs, "old, then put again") != deduped {
		t.Fatal("dedup changed the hash")
	}

	// Temp files: one from a Put dead for two hours, one still being written,
	// and a file that is not ours.
	tmp := filepath.Join(dir, "tmp")
	for _, name := range []string{"put-dead", "put-live", "unknown"} {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	age(t, filepath.Join(tmp, "put-dead"), 2*time.Hour)
	age(t, filepath.Join(tmp, "unknown"), 2*time.Hour)

	n, err := bs.GC(ctx, ix)
	if err != nil || n != 1 {
		t.Errorf("GC = %d, %v; want 1", n, err)
	}
	for _, tt := range []struct {
		name, sha string
		kept      bool
	}{
		{"referenced old blob", referencedOld, true},
		{"unreferenced old blob", unreferencedOld, false},
		{"blob being ingested", unreferencedNew, true},
		{"old blob put again", deduped, true},
	} {
		if got := exists(bs, tt.sha); got != tt.kept {
			t.Errorf("%s: exists = %v, want %v", tt.name, got, tt.kept)
		}
	}
	for name, want := range map[string]bool{"put-dead": false, "put-live": true, "unknown": true} {
		if _, err := os.Stat(filepath.Join(tmp, name)); (err == nil) != want {
			t.Errorf("temp file %s: stat %v, want kept %v", name, err, want)
		}
	}

	// The pending Add completes: its blob is there.
	a, err := ix.Add(ctx, artifacts.Artifact{Namespace: "ns", SessionID: "s", Name: "n", SHA256: unreferencedNew})
	if err != nil {
		t.Fatal(err)
	}
	f, err := bs.Open(a.SHA256)
	if err != nil {
		t.Fatalf("blob of the pending Add: %v", err)
	}
	f.Close()

	// Once its rows are gone and its grace has passed, a blob goes.
	if _, err := ix.DeleteSession(ctx, "ns", "s"); err != nil {
		t.Fatal(err)
	}
	for _, sha := range []string{referencedOld, unreferencedNew} {
		p, _ := bs.Path(sha)
		age(t, p, 2*time.Hour)
	}
	if n, err := bs.GC(ctx, ix); err != nil || n != 2 {
		t.Errorf("second GC = %d, %v; want 2", n, err)
	}
	if blobs, temps := files(t, dir); len(blobs) != 1 || len(temps) != 2 {
		t.Errorf("left blobs %v, temp files %v; want the deduped blob, put-live and unknown", blobs, temps)
	}
}

func TestGCGrace(t *testing.T) {
	bs := artifacts.NewBlobstore(t.TempDir())
	bs.Grace = time.Minute
	ix := artifacts.NewIndex(openStore(t))
	sha := put(t, bs, "x")
	p, _ := bs.Path(sha)
	age(t, p, 30*time.Second)
	if n, err := bs.GC(t.Context(), ix); err != nil || n != 0 || !exists(bs, sha) {
		t.Errorf("GC inside grace = %d, %v", n, err)
	}
	age(t, p, 2*time.Minute)
	if n, err := bs.GC(t.Context(), ix); err != nil || n != 1 || exists(bs, sha) {
		t.Errorf("GC past grace = %d, %v", n, err)
	}
}

// TestGCDuringIngestion runs GC in a loop while goroutines ingest content
// whose blobs are old and unreferenced, the case where GC and a deduplicating
// Put meet: no row may end up without its blob.
func TestGCDuringIngestion(t *testing.T) {
	ctx := t.Context()
	bs := artifacts.NewBlobstore(t.TempDir())
	ix := artifacts.NewIndex(openStore(t))
	const blobs, workers = 40, 4
	content := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), 1000+i) }
	for i := range blobs {
		p, _ := bs.Path(put(t, bs, content(i)))
		age(t, p, 2*time.Hour)
	}

	done := make(chan struct{})
	gcDone := make(chan int)
	go func() {
		removed := 0
		for {
			select {
			case <-done:
				gcDone <- removed
				return
			default:
			}
			n, err := bs.GC(ctx, ix)
			if err != nil {
				t.Error(err)
			}
			removed += n
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < blobs; i += workers {
				sha, size, err := bs.Put(ctx, strings.NewReader(content(i)))
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := ix.Add(ctx, artifacts.Artifact{Namespace: "ns", SessionID: "s",
					Name: strconv.Itoa(i), SHA256: sha, Size: size}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	t.Logf("GC removed %d blobs during ingestion", <-gcDone)

	list, err := ix.BySession(ctx, "ns", "s")
	if err != nil || len(list) != blobs {
		t.Fatalf("%d rows, %v; want %d", len(list), err, blobs)
	}
	for _, a := range list {
		if !exists(bs, a.SHA256) {
			t.Errorf("row %s (%s): blob missing", a.Name, a.SHA256)
		}
	}
}
