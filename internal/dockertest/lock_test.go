package dockertest

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImageLockBounded: waiting for the image lock another test process
// holds ends with the context, saying who holds it, instead of blocking
// until go test kills the binary (TestEnsureRebuildsStaleImage hung 600 s).
func TestImageLockBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "image.lock")
	unlock, err := lock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		u, err := lock(ctx, path) // a second descriptor: flock refuses it
		if err == nil {
			u()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "another test process held it") {
			t.Errorf("lock held elsewhere: %v, want the deadline, naming the holder", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("waiting for a held image lock outlived its context by a minute")
	}
	unlock()
	u, err := lock(context.Background(), path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	u()
}
