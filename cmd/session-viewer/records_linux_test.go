package main

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenNoFollow checks the last line of defence on its own, as a record
// swapped between the viewer's check and its open would meet it: a link is
// refused by the open itself, and a named pipe opens without blocking.
func TestOpenNoFollow(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "target"), []byte(leak), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	if f, err := openNoFollow(nil, d, "link"); !errors.Is(err, errSymlink) {
		if f != nil {
			f.Close()
		}
		t.Errorf("open of a link: %v, want %v", err, errSymlink)
	}

	done := make(chan error, 1)
	go func() {
		f, err := openNoFollow(nil, d, "fifo")
		if err == nil {
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil && fi.Mode()&os.ModeNamedPipe == 0 {
				err = errors.New("not the pipe")
			}
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("open of a named pipe: %v", err)
		}
	case <-time.After(5 * time.Second):
		// Let the blocked open go before failing.
		if f, err := os.OpenFile(filepath.Join(dir, "fifo"), os.O_RDWR, 0); err == nil {
			f.Close()
		}
		t.Fatal("open of a named pipe blocked")
	}
}
