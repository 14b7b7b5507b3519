package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
)

// records are the files a BIND session folder holds for the viewer.
var records = []string{session.LogFile, session.MetadataFile, session.StateFile, session.DatasetsFile}

// leak is in every decoy record; the viewer must never show it.
const leak = "LEAKED-THROUGH-A-LINK"

// decoy returns the content of a valid record named name that shows leak.
func decoy(name string) string {
	switch name {
	case session.LogFile:
		return `{"time":"2025-03-04T10:00:00Z","id":"` + leak + `","execution_count":9,"code":"` + leak + `"}` + "\n"
	case session.MetadataFile:
		return `{"key":"` + leak + `","id":"` + leak + `"}`
	case session.StateFile:
		return `{"variables":[{"name":"` + leak + `","type":"int","repr":"1"}],"modules":[]}`
	}
	return `[{"dataset_id":"` + leak + `","name":"` + leak + `","status":"LOADED"}]`
}

// layoutFolder is bindFolder in the layout asked for: "new" adds the
// workspace/ folder beside the records, "old" leaves the records in the
// folder the sandbox wrote.
func layoutFolder(t *testing.T, layout string) string {
	t.Helper()
	dir := bindFolder(t)
	if layout == "old" {
		if err := os.Remove(filepath.Join(dir, "workspace")); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// trap replaces dir/name by something a sandbox could plant there, and
// returns the reason the viewer must give for refusing it.
type trap struct {
	name   string
	plant  func(t *testing.T, dir, name string)
	reason string
}

var traps = []trap{
	{"link to a host file", func(t *testing.T, dir, name string) {
		host := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(host, []byte(decoy(name)), 0o644); err != nil {
			t.Fatal(err)
		}
		replace(t, dir, name, func(p string) error { return os.Symlink(host, p) })
	}, "a symbolic link, not followed"},
	{"link inside the folder", func(t *testing.T, dir, name string) {
		if err := os.WriteFile(filepath.Join(dir, "decoy-"+name), []byte(decoy(name)), 0o644); err != nil {
			t.Fatal(err)
		}
		replace(t, dir, name, func(p string) error { return os.Symlink("decoy-"+name, p) })
	}, "a symbolic link, not followed"},
	{"link to nowhere", func(t *testing.T, dir, name string) {
		replace(t, dir, name, func(p string) error { return os.Symlink(filepath.Join(t.TempDir(), "missing"), p) })
	}, "a symbolic link, not followed"},
	{"named pipe", func(t *testing.T, dir, name string) {
		replace(t, dir, name, func(p string) error { return syscall.Mkfifo(p, 0o644) })
		// Should the viewer block on it, this lets it go when the test ends.
		t.Cleanup(func() {
			if f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		})
	}, "not a regular file (a named pipe)"},
	{"folder", func(t *testing.T, dir, name string) {
		replace(t, dir, name, func(p string) error { return os.Mkdir(p, 0o755) })
	}, "not a regular file (a directory)"},
}

func replace(t *testing.T, dir, name string, make func(path string) error) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := make(p); err != nil {
		t.Fatal(err)
	}
}

// viewerWithin runs the viewer and fails the test if it has not returned
// after d: a read that blocks (a named pipe) must not hang the viewer.
func viewerWithin(t *testing.T, d time.Duration, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan outcome, 1)
	go func() {
		var stdout, stderr syncBuffer
		code := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
		done <- outcome{code, stdout.String(), stderr.String()}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(d):
		t.Fatalf("session-viewer %q still running after %s: blocked", args, d)
		return outcome{}
	}
}

// TestDirRefusesPlantedRecords plants, at every record's name and in both
// layouts, a symbolic link (to a host file, to a file in the folder, to
// nothing), a named pipe and a folder. The viewer must not block, must not
// read through the link, and must say which file it refused and why.
func TestDirRefusesPlantedRecords(t *testing.T) {
	for _, layout := range []string{"new", "old"} {
		for _, name := range records {
			for _, tr := range traps {
				t.Run(layout+"/"+name+"/"+tr.name, func(t *testing.T) {
					dir := layoutFolder(t, layout)
					tr.plant(t, dir, name)
					want := name + ": " + tr.reason
					for _, asJSON := range []bool{false, true} {
						args := []string{"--dir", dir}
						if asJSON {
							args = append(args, "--json")
						}
						r := viewerWithin(t, 10*time.Second, args...)
						all := r.stdout + r.stderr
						if strings.Contains(all, leak) {
							t.Fatalf("json %v: read through the link:\n%s", asJSON, all)
						}
						if name == session.MetadataFile {
							// Without its metadata there is no session to show.
							if r.code != exitSystem || !strings.Contains(r.stderr, want) {
								t.Errorf("json %v: exit %d, stderr %q; want %d and %q", asJSON, r.code, r.stderr, exitSystem, want)
							}
							continue
						}
						if r.code != exitOK {
							t.Fatalf("json %v: exit %d: %s", asJSON, r.code, r.stderr)
						}
						if asJSON {
							var v view
							if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
								t.Fatalf("--json: %v\n%s", err, r.stdout)
							}
							if !containsString(v.Warnings, want) {
								t.Errorf("--json warnings %q, want %q", v.Warnings, want)
							}
						} else if !strings.Contains(r.stdout, want) {
							t.Errorf("text view does not say %q:\n%s", want, r.stdout)
						}
					}
				})
			}
		}
	}
}

func containsString(list []string, s string) bool {
	for _, l := range list {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// TestDirLayouts checks what the viewer says about who could write the
// records: nothing in the new layout (records beside workspace/), and once,
// in text and in --json, that they may be forged in the old one, or when
// the folder holding them is open to other users.
func TestDirLayouts(t *testing.T) {
	const note = "may be forged"
	tests := []struct {
		name    string
		setup   func(t *testing.T) string
		forgery bool
	}{
		{"new layout", func(t *testing.T) string { return layoutFolder(t, "new") }, false},
		{"old layout", func(t *testing.T) string { return layoutFolder(t, "old") }, true},
		{"workspace is a link", func(t *testing.T) string {
			dir := layoutFolder(t, "old")
			if err := os.Symlink(t.TempDir(), filepath.Join(dir, "workspace")); err != nil {
				t.Fatal(err)
			}
			return dir
		}, true},
		{"workspace is a link inside the folder", func(t *testing.T) string {
			dir := layoutFolder(t, "old")
			if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("data", filepath.Join(dir, "workspace")); err != nil {
				t.Fatal(err)
			}
			return dir
		}, true},
		{"workspace is a file", func(t *testing.T) string {
			dir := layoutFolder(t, "old")
			if err := os.WriteFile(filepath.Join(dir, "workspace"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, true},
		{"records folder open to all", func(t *testing.T) string {
			dir := layoutFolder(t, "new")
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			return dir
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.setup(t)
			r := viewerWithin(t, 10*time.Second, "--dir", dir)
			if r.code != exitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if n := strings.Count(r.stdout, note); (n == 1) != tt.forgery || n > 1 {
				t.Errorf("text says %q %d times, want it once: %v\n%s", note, n, tt.forgery, r.stdout)
			}
			r = viewerWithin(t, 10*time.Second, "--json", "--dir", dir)
			var v map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
				t.Fatalf("--json: %v\n%s", err, r.stdout)
			}
			if got, _ := v["records_writable_by_sandbox"].(bool); got != tt.forgery {
				t.Errorf("--json records_writable_by_sandbox = %v, want %v", v["records_writable_by_sandbox"], tt.forgery)
			}
		})
	}
}

// TestDirBoundedReads checks that records are read up to a bound: a JSON
// record past it is refused with the reason, and of a session.log past it
// only the last part is read, which the view says.
func TestDirBoundedReads(t *testing.T) {
	dir := layoutFolder(t, "new")
	f, err := os.OpenFile(filepath.Join(dir, session.StateFile), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxRecordBytes + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	log := filepath.Join(dir, session.LogFile)
	f, err = os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if err := f.Truncate(fi.Size() + maxLogBytes); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("\n")); err != nil { // the zeros are one line
		t.Fatal(err)
	}
	f.Close()
	appendLog(t, dir, session.LogEntry{ID: "e-last", ExecutionCount: 99, Code: "print('last')"})

	r := viewerWithin(t, time.Minute, "--json", "--dir", dir)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var v view
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("--json: %v", err)
	}
	if !containsString(v.Warnings, session.StateFile+": larger than 4 MiB, not read") {
		t.Errorf("warnings %q, want python_state.json refused for its size", v.Warnings)
	}
	if !containsString(v.Warnings, session.LogFile+": larger than 64 MiB") {
		t.Errorf("warnings %q, want session.log said to be read in part", v.Warnings)
	}
	if n := len(v.Executions); n == 0 || v.Executions[n-1].ID != "e-last" {
		t.Errorf("executions %+v, want the last one, e-last", v.Executions)
	}
}

// TestDirFollowPlantedLog runs --follow on a folder whose session.log is a
// named pipe, and on one whose session.log becomes a link after the first
// view: --follow must neither block nor read through, must say why once,
// and must stop when asked.
func TestDirFollowPlantedLog(t *testing.T) {
	for _, tr := range []trap{traps[0], traps[3]} {
		t.Run(tr.name, func(t *testing.T) {
			for _, late := range []bool{false, true} {
				dir := layoutFolder(t, "new")
				if !late {
					tr.plant(t, dir, session.LogFile)
				}
				ctx, cancel := context.WithCancel(context.Background())
				var stdout, stderr syncBuffer
				done := make(chan int, 1)
				go func() { done <- run(ctx, []string{"--follow", "--dir", dir}, nil, &stdout, &stderr) }()
				time.Sleep(300 * time.Millisecond)
				if late {
					tr.plant(t, dir, session.LogFile)
				}
				time.Sleep(4 * pollInterval)
				cancel()
				select {
				case code := <-done:
					if code != exitOK {
						t.Errorf("late %v: exit %d: %s", late, code, stderr.String())
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("late %v: --follow did not stop: blocked", late)
				}
				all := stdout.String() + stderr.String()
				if strings.Contains(all, leak) {
					t.Errorf("late %v: read through the link:\n%s", late, all)
				}
				want := session.LogFile + ": " + tr.reason
				if n := strings.Count(all, want); n != 1 {
					t.Errorf("late %v: %q said %d times, want once:\n%s", late, want, n, all)
				}
			}
		})
	}
}

// TestReadLogSkips checks that lines that are not executions do not hide
// the ones after them, and that a line longer than the bound is skipped
// rather than read again at every --follow poll.
func TestReadLogSkips(t *testing.T) {
	dir := layoutFolder(t, "new")
	log := filepath.Join(dir, session.LogFile)
	if err := os.WriteFile(log, []byte("not json\n{\"id\":\"e1\"}\n[1]\n{\"id\":\"e2\"}\n{\"id\":\"half"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := openFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, next, _, err := f.readLog(0, true)
	if len(entries) != 2 || entries[0].ID != "e1" || entries[1].ID != "e2" {
		t.Errorf("entries %+v, want e1 and e2", entries)
	}
	if want := "session.log: 2 lines are not JSON executions, the first at byte 0: skipped"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if want := int64(strings.Index(mustRead(t, log), `{"id":"half`)); next != want {
		t.Errorf("next %d, want %d (the start of the half-written line)", next, want)
	}

	if err := os.WriteFile(log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(log, maxLogBytes+10); err != nil { // one line of zeros, sparse
		t.Fatal(err)
	}
	entries, next, _, err = f.readLog(0, false)
	if len(entries) != 0 || next != maxLogBytes || err == nil || !strings.Contains(err.Error(), "longer than 64 MiB: skipped") {
		t.Errorf("a line past the bound: %d entries, next %d, error %v; want none, %d and the line skipped", len(entries), next, err, maxLogBytes)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadStateFileRefusesPlanted checks the one record the KEY view reads
// from the session folder (the last python_state.json, when the live state
// is out of reach): a link is not read through, and a record the sandbox
// could have written says so.
func TestReadStateFileRefusesPlanted(t *testing.T) {
	dir := layoutFolder(t, "new")
	traps[0].plant(t, dir, session.StateFile)
	var v view
	if s, err := readStateFile(dir, &v); s != nil || err == nil {
		t.Errorf("read through a link: %+v, %v", s, err)
	}
	if !containsString(v.Warnings, session.StateFile+": a symbolic link, not followed") {
		t.Errorf("warnings %q, want the link refused", v.Warnings)
	}

	dir = layoutFolder(t, "old")
	v = view{}
	if s, err := readStateFile(dir, &v); s == nil || err != nil {
		t.Fatalf("old layout: %v", err)
	}
	if !containsString(v.Warnings, "may be forged") {
		t.Errorf("warnings %q, want the state said to be forgeable", v.Warnings)
	}
}
