package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
)

func TestRemoteSpec(t *testing.T) {
	for _, tt := range []struct {
		in        string
		key, path string
		remote    bool
	}{
		{"k:/session/a", "k", "/session/a", true},
		{"k:a.txt", "k", "a.txt", true},
		{"user:42:/session/x", "user:42", "/session/x", true},
		{"/abs/with:colon", "", "/abs/with:colon", false},
		{"./rel:x", "", "./rel:x", false},
		{"-", "", "-", false},
		{"plain", "", "plain", false},
		{":/x", "", ":/x", false},
	} {
		key, p, remote := remoteSpec(tt.in)
		if key != tt.key || p != tt.path || remote != tt.remote {
			t.Errorf("remoteSpec(%q) = %q, %q, %v; want %q, %q, %v", tt.in, key, p, remote, tt.key, tt.path, tt.remote)
		}
	}
}

// TestCpAndFiles copies a folder in and out of a session, through files
// and tar streams, and lists it, on the engine.
func TestCpAndFiles(t *testing.T) {
	sandboxEnv(t)
	src := filepath.Join(t.TempDir(), "src")
	for name, body := range map[string]string{"data.csv": "a,b\n1,2\n", "sub/note.txt": "hi\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755)
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(src, "empty"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(src, "link"))

	r := agentbox(t, "", "cp", src, "k:/session/")
	if r.code != exitOK || r.stdout != "copied 2 files (11 bytes) to k:/session/; skipped 1 entry (links, pipes, devices)\n" {
		t.Fatalf("cp in: exit %d, %q, %s", r.code, r.stdout, r.stderr)
	}
	r = agentbox(t, "", "files", "--session", "k", "-r", "/session/src")
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(l)
		names = append(names, f[0]+" "+f[len(f)-1])
	}
	if want := "drwxr-xr-x /session/src/empty|-rw-r--r-- /session/src/data.csv|drwxr-xr-x /session/src/sub|-rw-r--r-- /session/src/sub/note.txt"; r.code != exitOK || !sameSet(names, want) {
		t.Errorf("files -r: exit %d\n%s\nwant %s (%s)", r.code, r.stdout, want, r.stderr)
	}
	r = agentbox(t, "", "files", "--session", "k", "--json", "src")
	var list struct {
		Path    string
		Entries []struct {
			Path, Type, Mode string
			Size             int64
			Mtime            time.Time
		}
		Truncated bool
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || list.Path != "/session/src" || len(list.Entries) != 3 ||
		list.Entries[0].Path != "/session/src/data.csv" || list.Entries[0].Mode != "0644" || list.Entries[0].Size != 8 || list.Entries[0].Mtime.IsZero() {
		t.Errorf("files --json: %q: %v", r.stdout, err)
	}

	out := filepath.Join(t.TempDir(), "back")
	if r := agentbox(t, "", "cp", "k:src", out); r.code != exitOK {
		t.Fatalf("cp out: exit %d: %s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(out, "sub", "note.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("copied back: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(out, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("the empty folder did not come back: %v", err)
	}

	r = agentbox(t, "", "cp", "k:/session/src", "-")
	if r.code != exitOK || !strings.HasPrefix(r.stderr, "copied 2 files") {
		t.Fatalf("cp to -: exit %d: %s", r.code, r.stderr)
	}
	var entries []string
	tr := tar.NewReader(strings.NewReader(r.stdout))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, h.Name)
	}
	if want := "src/|src/data.csv|src/empty/|src/sub/|src/sub/note.txt"; strings.Join(entries, "|") != want {
		t.Errorf("tar out: %v, want %s", entries, want)
	}
	// The same stream back in, elsewhere.
	if r := agentbox(t, r.stdout, "cp", "-", "k:/tmp/again"); r.code != exitOK || !strings.HasPrefix(r.stdout, "copied 2 files") {
		t.Fatalf("cp from -: exit %d: %q %s", r.code, r.stdout, r.stderr)
	}
	if r := agentbox(t, "", "cp", "k:/tmp/again/src/data.csv", "-"); r.code != exitOK || !strings.Contains(r.stdout, "a,b\n1,2\n") {
		t.Errorf("the file through two tar streams: %q", r.stdout)
	}

	for _, tt := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"cp", "k:/etc/shadow", filepath.Join(t.TempDir(), "x")}, exitFailed, "permission denied"},
		{[]string{"cp", "k:/session/nope", filepath.Join(t.TempDir(), "x")}, exitFailed, "no such file or folder"},
		{[]string{"cp", src, "k:/etc/"}, exitFailed, "permission denied"},
		{[]string{"cp", "k:../x", "y"}, exitFailed, "invalid path"},
		{[]string{"files", "--session", "never", "/session"}, exitFailed, "no such session"},
		{[]string{"files", "--session", "k", "/session/src/data.csv"}, exitFailed, "not a folder"},
		{[]string{"cp", "a", "b"}, exitUsage, "exactly one"},
		{[]string{"cp", "k:a", "j:b"}, exitUsage, "exactly one"},
		{[]string{"cp", "a"}, exitUsage, "want SRC and DST"},
	} {
		r := agentbox(t, "", tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, tt.code, tt.msg)
		}
		if tt.code != exitUsage || strings.HasPrefix(r.stderr, "agentbox: cp: want") {
			oneErrorLine(t, r.stderr)
		}
	}
}

func sameSet(got []string, want string) bool {
	w := strings.Split(want, "|")
	sort.Strings(w)
	g := append([]string(nil), got...)
	sort.Strings(g)
	return strings.Join(g, "|") == strings.Join(w, "|")
}

// TestFileTableEscapesSandboxText: names are the sandbox's to choose.
func TestFileTableEscapesSandboxText(t *testing.T) {
	var b bytes.Buffer
	writeFileTable(&b, &session.FileList{Entries: []session.FileInfo{
		{Path: "/session/" + hostile, Type: session.TypeFile, Size: 3},
		{Path: "/session/l", Type: session.TypeSymlink, Target: hostile},
	}})
	checkTerminalSafe(t, "files", b.String())
	if lines := strings.Count(b.String(), "\n"); lines != 2 {
		t.Errorf("files printed %d lines for two entries:\n%s", lines, b.String())
	}
}
