package session

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRecordsNeverFollowNorBlock plants, where the host writes a record, the
// things a hostile or careless hand could leave there: the write must not go
// through a link (to an existing file or to a missing one), must not block
// on a FIFO, must not write into a folder, and must say what it found.
func TestRecordsNeverFollowNorBlock(t *testing.T) {
	type plant func(t *testing.T, dir, name, victim string)
	link := func(t *testing.T, dir, name, victim string) {
		if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name        string
		plant       plant
		victimFirst bool
		appendErr   error // appendRecord's error; writeRecord replaces all but a folder
	}{
		{"link to an existing file", link, true, errLink},
		{"link to a missing file", link, false, errLink},
		{"fifo", func(t *testing.T, dir, name, _ string) {
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
				t.Fatal(err)
			}
		}, false, errNotRegular},
		{"folder", func(t *testing.T, dir, name, _ string) {
			if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
		}, false, errNotRegular},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			if c.victimFirst {
				os.WriteFile(victim, []byte("host\n"), 0o644)
			}
			c.plant(t, dir, LogFile, victim)
			c.plant(t, dir, MetadataFile, victim)
			done := make(chan error, 2)
			go func() {
				done <- appendRecord(dir, LogFile, []byte(`{"x":1}`))
				done <- writeRecord(dir, MetadataFile, map[string]int{"x": 1})
			}()
			var appendErr, writeErr error
			select {
			case appendErr = <-done:
				writeErr = <-done
			case <-time.After(10 * time.Second):
				t.Fatal("a record write blocked")
			}
			if !errors.Is(appendErr, c.appendErr) {
				t.Fatalf("append: got %v, want %v", appendErr, c.appendErr)
			}
			data, err := os.ReadFile(victim)
			if c.victimFirst && string(data) != "host\n" || !c.victimFirst && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("written through a link: %q, %v", data, err)
			}
			fi, err := os.Lstat(filepath.Join(dir, MetadataFile))
			if c.name == "folder" {
				if !errors.Is(writeErr, errNotRegular) || err != nil || !fi.IsDir() {
					t.Fatalf("write over a folder: %v (%v)", writeErr, fi.Mode())
				}
			} else if writeErr != nil || err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("the record should replace what was planted: %v, %v", writeErr, err)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*"))
			if len(left) > 0 {
				t.Fatalf("temporary files left: %v", left)
			}
		})
	}
}

// TestRecordsDirIsNotFollowed: a link in place of the session folder itself
// is refused, not followed.
func TestRecordsDirIsNotFollowed(t *testing.T) {
	target := t.TempDir()
	dir := filepath.Join(t.TempDir(), "session")
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	if err := appendRecord(dir, LogFile, []byte("{}")); !errors.Is(err, errLink) {
		t.Fatalf("got %v, want errLink", err)
	}
	if _, err := os.Stat(filepath.Join(target, LogFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("written through the folder link: %v", err)
	}
}
