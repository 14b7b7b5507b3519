package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/internal/store"
)

// TestGCOlderThanZero: -older-than 0s forgets every artifact (and GC then
// removes their blobs); leaving the flag out keeps them all, and says so.
func TestGCOlderThanZero(t *testing.T) {
	env, dir := testEnv(t)
	db, err := store.Open(t.Context(), filepath.Join(dir, "db", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	blobs := artifacts.NewBlobstore(filepath.Join(dir, "blobs"))
	sha, size, err := blobs.Put(t.Context(), strings.NewReader("a,b\n1,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	index := artifacts.NewIndex(db)
	a, err := index.Add(t.Context(), artifacts.Artifact{SessionID: "s1", Name: "t.csv", SHA256: sha, Size: size, MIME: "text/csv"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)

	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"-env-file", env, "gc", "-grace", "1ms"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, &errb)
	}
	if !strings.Contains(out.String(), "kept every artifact") || !strings.Contains(out.String(), "removed 0 ") {
		t.Errorf("without -older-than: stdout %q, want every artifact kept, and said", &out)
	}
	if _, err := index.Get(t.Context(), a.ID); err != nil {
		t.Fatalf("without -older-than the artifact went: %v", err)
	}

	out.Reset()
	if code := run(t.Context(), []string{"-env-file", env, "gc", "-grace", "1ms", "-older-than", "0s"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, &errb)
	}
	if !strings.Contains(out.String(), "forgot 1 ") || !strings.Contains(out.String(), "removed 1 ") {
		t.Errorf("-older-than 0s: stdout %q, want the artifact forgotten and its blob removed", &out)
	}
	if _, err := index.Get(t.Context(), a.ID); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("-older-than 0s kept the artifact: %v", err)
	}
}
