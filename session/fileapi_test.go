package session_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
)

// storages runs f under TMPFS and BIND: the files API must behave the same
// in both, the container's view being the only one it uses.
func storages(t *testing.T, f func(t *testing.T, s config.Storage)) {
	for _, s := range []config.Storage{config.StorageTMPFS, config.StorageBind} {
		t.Run(string(s), func(t *testing.T) { t.Parallel(); f(t, s) })
	}
}

func withStorage(s config.Storage, more ...func(*config.Config)) func(*config.Config) {
	return func(c *config.Config) {
		c.SessionStorage = s
		for _, f := range more {
			f(c)
		}
	}
}

func readAll(t *testing.T, m *session.Manager, key, path string, off, n int64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := m.ReadFile(ctx, key, path, off, n)
	if err != nil {
		t.Fatalf("read %q: %v", path, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %q: %v", path, err)
	}
	return string(b)
}

// wantErr checks that err is a *session.FileError matching target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	var fe *session.FileError
	if !errors.Is(err, target) || !errors.As(err, &fe) {
		t.Errorf("%s: got %v, want a *FileError matching %q", what, err, target)
	}
}

// TestFilesRoundTrip writes, reads, lists, moves and removes files through
// the API, and checks that code sees them as the sandbox user's own.
func TestFilesRoundTrip(t *testing.T) {
	t.Parallel()
	storages(t, func(t *testing.T, s config.Storage) {
		m := newManager(t, withStorage(s))
		ctx := context.Background()
		res, err := m.WriteFiles(ctx, "k", []session.FileWrite{
			{Path: "in/a.txt", Data: strings.NewReader("hello, sandbox")},
			{Path: "/session/in/deep/run.sh", Mode: 0o755, Data: bytes.NewReader([]byte("#!/bin/sh\necho hi\n"))},
			{Path: "/tmp/empty"},
			{Path: "/session/in/stream.bin", Data: io.MultiReader(strings.NewReader("ab"), strings.NewReader("cd"))},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []int64{14, 18, 0, 4} {
			if res[i].Err != nil || res[i].Size != want {
				t.Errorf("result %d: %+v, want %d bytes written", i, res[i], want)
			}
		}
		if res[0].Path != "/session/in/a.txt" {
			t.Errorf("relative path cleaned to %q", res[0].Path)
		}
		if got := readAll(t, m, "k", "in/a.txt", 0, -1); got != "hello, sandbox" {
			t.Errorf("read back %q", got)
		}
		if got := readAll(t, m, "k", "/session/in/a.txt", 7, 3); got != "san" {
			t.Errorf("read offset 7, 3 bytes: %q", got)
		}
		if got := readAll(t, m, "k", "/session/in/a.txt", 100, -1); got != "" {
			t.Errorf("read past the end: %q", got)
		}
		out := plain(mustExec(t, m, "k", `import os
st = [os.stat(p) for p in ("/session/in/a.txt", "/session/in/deep/run.sh", "/tmp/empty", "/session/in/deep")]
[(s.st_uid, s.st_gid, oct(s.st_mode & 0o7777)) for s in st], open("/session/in/stream.bin").read()`))
		if want := "([(1000, 1000, '0o644'), (1000, 1000, '0o755'), (1000, 1000, '0o644'), (1000, 1000, '0o755')], 'abcd')"; out != want {
			t.Errorf("code sees %s, want %s", out, want)
		}
		fi, err := m.StatFile(ctx, "k", "/session/in/deep/run.sh")
		if err != nil || fi.Type != session.TypeFile || fi.Size != 18 || fi.Mode != 0o755 || fi.Name() != "run.sh" || time.Since(fi.ModTime) > time.Hour {
			t.Errorf("stat: %+v, %v", fi, err)
		}
		list, err := m.ListFiles(ctx, "k", "/session/in", session.ListOptions{Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, e := range list.Entries {
			paths = append(paths, fmt.Sprintf("%s %s %d", e.Path, e.Type, e.Size))
		}
		want := "/session/in/a.txt file 14|/session/in/deep dir |/session/in/deep/run.sh file 18|/session/in/stream.bin file 4"
		if got := strings.Join(paths, "|"); !matchesIgnoringDirSize(got, want) || list.Truncated {
			t.Errorf("recursive list:\n got %s\nwant %s", got, want)
		}
		list, err = m.ListFiles(ctx, "k", "/session/in", session.ListOptions{Limit: 2})
		if err != nil || len(list.Entries) != 2 || !list.Truncated {
			t.Errorf("list limited to 2: %+v, %v", list, err)
		}
		g, err := m.Glob(ctx, "k", "/session/**/*.sh", session.ListOptions{})
		if err != nil || len(g.Entries) != 1 || g.Entries[0].Path != "/session/in/deep/run.sh" {
			t.Errorf("glob **/*.sh: %+v, %v", g, err)
		}
		g, err = m.Glob(ctx, "k", "in/*.txt", session.ListOptions{})
		if err != nil || len(g.Entries) != 1 || g.Entries[0].Path != "/session/in/a.txt" {
			t.Errorf("glob in/*.txt: %+v, %v", g, err)
		}

		if err := m.MakeDir(ctx, "k", "/session/made/x/y", 0); err != nil {
			t.Fatal(err)
		}
		if err := m.MakeDir(ctx, "k", "/session/made/x/y", 0); err != nil {
			t.Errorf("mkdir of an existing folder: %v", err)
		}
		wantErr(t, "mkdir over a file", m.MakeDir(ctx, "k", "/session/in/a.txt", 0), session.ErrNotDir)
		if err := m.MoveFile(ctx, "k", "/session/in/a.txt", "/session/made/a.txt", false); err != nil {
			t.Fatal(err)
		}
		if err := m.MoveFile(ctx, "k", "/session/made/a.txt", "/tmp/a.txt", false); err != nil {
			t.Fatalf("move across filesystems: %v", err)
		}
		wantErr(t, "move onto an existing file", m.MoveFile(ctx, "k", "/tmp/a.txt", "/tmp/empty", false), session.ErrFileExists)
		if err := m.MoveFile(ctx, "k", "/tmp/a.txt", "/tmp/empty", true); err != nil {
			t.Errorf("move with overwrite: %v", err)
		}
		if got := readAll(t, m, "k", "/tmp/empty", 0, -1); got != "hello, sandbox" {
			t.Errorf("after the moves: %q", got)
		}
		wantErr(t, "remove a full folder", m.RemoveFile(ctx, "k", "/session/in", false), session.ErrNotEmpty)
		if err := m.RemoveFile(ctx, "k", "/session/in", true); err != nil {
			t.Fatal(err)
		}
		_, err = m.StatFile(ctx, "k", "/session/in")
		wantErr(t, "stat after remove", err, session.ErrFileNotFound)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ErrFileNotFound does not match fs.ErrNotExist: %v", err)
		}
	})
}

// matchesIgnoringDirSize compares listings, a folder's size (which differs
// between tmpfs and a disk) left out.
func matchesIgnoringDirSize(got, want string) bool {
	parts := strings.Split(got, "|")
	for i, p := range parts {
		if strings.Contains(p, " dir ") {
			parts[i] = p[:strings.Index(p, " dir ")+5]
		}
	}
	return strings.Join(parts, "|") == want
}

// TestFilesFaults: the errors callers must be able to tell apart.
func TestFilesFaults(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := context.Background()
	_, err := m.ReadFile(ctx, "never-used", "/session/x", 0, -1)
	if !errors.Is(err, session.ErrNotFound) {
		t.Errorf("read in a session that does not exist: %v, want ErrNotFound", err)
	}
	mustExec(t, m, "k", `import os; os.makedirs("/session/d"); open("/session/f", "w").write("x")`)
	_, err = m.ReadFile(ctx, "k", "/session/d", 0, -1)
	wantErr(t, "read a folder", err, session.ErrIsDir)
	_, err = m.ReadFile(ctx, "k", "/session/missing", 0, -1)
	wantErr(t, "read a missing file", err, session.ErrFileNotFound)
	_, err = m.ListFiles(ctx, "k", "/session/f", session.ListOptions{})
	wantErr(t, "list a file", err, session.ErrNotDir)
	_, err = m.WriteFile(ctx, "k", "/session/d", strings.NewReader("x"), 0)
	wantErr(t, "write over a folder", err, session.ErrIsDir)
	_, err = m.WriteFile(ctx, "k", "/session/f/under", strings.NewReader("x"), 0)
	wantErr(t, "write under a file", err, session.ErrNotDir)
	_, err = m.ReadFile(ctx, "k", "/session/f", -1, 1)
	wantErr(t, "negative offset", err, session.ErrBadPath)
	_, err = m.Glob(ctx, "k", "/session/[", session.ListOptions{})
	wantErr(t, "bad pattern", err, session.ErrBadPath)
	var fe *session.FileError
	if _, err := m.StatFile(ctx, "k", "/session/missing\nline"); !errors.As(err, &fe) || fe.Key != "k" || fe.Path != "/session/missing\nline" || strings.Contains(err.Error(), "\n") {
		t.Errorf("error names neither the key nor the path, or prints a raw newline: %v", err)
	}
}

// TestFilesHostilePaths: paths and planted files that try to reach outside
// what the sandbox user may touch, or to block the host.
func TestFilesHostilePaths(t *testing.T) {
	t.Parallel()
	storages(t, func(t *testing.T, s config.Storage) {
		m := newManager(t, withStorage(s))
		ctx := context.Background()
		// A secret on the host, and links to host-looking paths planted by
		// the code: inside the container they lead nowhere, or to what the
		// sandbox user may read anyway.
		secret := filepath.Join(t.TempDir(), "secret.txt")
		if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
			t.Fatal(err)
		}
		mustExec(t, m, "k", fmt.Sprintf(`import os
os.symlink(%q, "/session/leak")
os.symlink(%q, "/session/hostdir")
os.symlink("/etc", "/session/etc")
os.symlink("/etc/hostname", "/session/hostname")
os.mkfifo("/session/pipe")
os.makedirs("/session/artifacts", exist_ok=True)`, secret, filepath.Dir(secret)))

		for _, p := range []string{"/session/../etc/passwd", "../x", "/session/a/../../etc/x", "/tmp/\x00x", ""} {
			_, err := m.WriteFile(ctx, "k", p, strings.NewReader("x"), 0)
			wantErr(t, fmt.Sprintf("write %q", p), err, session.ErrBadPath)
			_, err = m.ReadFile(ctx, "k", p, 0, -1)
			wantErr(t, fmt.Sprintf("read %q", p), err, session.ErrBadPath)
		}
		for _, p := range []string{"/etc/passwd", "/usr/bin/python3", "/opt/agentbox/x.py", "/session/etc/evil", "/var/lib/x", "/x"} {
			_, err := m.WriteFile(ctx, "k", p, strings.NewReader("x"), 0)
			wantErr(t, "write "+p, err, session.ErrPermission)
		}
		_, err := m.ReadFile(ctx, "k", "/etc/shadow", 0, -1)
		wantErr(t, "read /etc/shadow", err, session.ErrPermission)
		for _, p := range []string{"/session", "/tmp", "/", "/session/"} {
			wantErr(t, "remove "+p, m.RemoveFile(ctx, "k", p, true), session.ErrBadPath)
		}
		_, err = m.ReadFile(ctx, "k", "/session/leak", 0, -1)
		wantErr(t, "read through a link to a host path", err, session.ErrFileNotFound)
		_, err = m.ListFiles(ctx, "k", "/session/hostdir", session.ListOptions{})
		wantErr(t, "list through a link to a host folder", err, session.ErrFileNotFound)
		if err := m.RemoveFile(ctx, "k", "/session/leak", false); err != nil {
			t.Errorf("remove a link: %v", err)
		}
		if b, err := os.ReadFile(secret); err != nil || string(b) != "host secret" {
			t.Errorf("the host file after removing a link to it: %q, %v", b, err)
		}
		// A write to a link replaces the link, never what it points to.
		if _, err := m.WriteFile(ctx, "k", "/session/hostname", strings.NewReader("mine"), 0); err != nil {
			t.Errorf("write over a link: %v", err)
		}
		if out := plain(mustExec(t, m, "k", `import os; os.path.islink("/session/hostname"), open("/session/hostname").read(), open("/etc/hostname").read() != "mine"`)); out != "(False, 'mine', True)" {
			t.Errorf("after writing over a link: %s", out)
		}
		fi, err := m.StatFile(ctx, "k", "/session/etc")
		if err != nil || fi.Type != session.TypeSymlink || fi.Target != "/etc" {
			t.Errorf("stat of a link: %+v, %v", fi, err)
		}
		// A named pipe is refused at once, never opened for a peer that
		// never comes; writing one replaces it.
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_, err = m.ReadFile(pctx, "k", "/session/pipe", 0, -1)
		wantErr(t, "read a named pipe", err, session.ErrNotRegular)
		if _, err := m.WriteFile(pctx, "k", "/session/pipe", strings.NewReader("now a file"), 0); err != nil {
			t.Errorf("write over a named pipe: %v", err)
		}
		if got := readAll(t, m, "k", "/session/pipe", 0, -1); got != "now a file" {
			t.Errorf("the pipe after the write: %q", got)
		}
		// Names with newlines and escapes are names like any other.
		odd := "/session/line\nbreak \x1b[31m.txt"
		if _, err := m.WriteFile(ctx, "k", odd, strings.NewReader("odd"), 0); err != nil {
			t.Fatal(err)
		}
		list, err := m.ListFiles(ctx, "k", "/session", session.ListOptions{})
		found := false
		for _, e := range list.Entries {
			found = found || e.Path == odd
		}
		if err != nil || !found {
			t.Errorf("the odd name is not listed as written: %+v, %v", list, err)
		}
		if got := readAll(t, m, "k", odd, 0, -1); got != "odd" {
			t.Errorf("read the odd name: %q", got)
		}
		if s == config.StorageBind {
			// The host's own records beside the workspace stay out of reach.
			_, err := m.ReadFile(ctx, "k", "/session/../session.log", 0, -1)
			wantErr(t, "read the records folder", err, session.ErrBadPath)
		}
	})
}

// TestFilesCaps: FILES_MAX_FILE_MB and FILES_MAX_CALL_MB hold, whether the
// caller's reader says its size or not, and a refused file is not kept.
func TestFilesCaps(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.FilesMaxFileMB, c.FilesMaxCallMB = 1, 2 })
	ctx := context.Background()
	big := bytes.Repeat([]byte("x"), 1<<20+1)
	res, err := m.WriteFiles(ctx, "k", []session.FileWrite{
		{Path: "sized", Data: bytes.NewReader(big)},
		{Path: "unsized", Data: io.MultiReader(bytes.NewReader(big))},
		{Path: "fits", Data: bytes.NewReader(big[:1<<20])},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a sized file over the cap", res[0].Err, session.ErrFileTooLarge)
	wantErr(t, "an unsized file over the cap", res[1].Err, session.ErrFileTooLarge)
	if res[2].Err != nil || res[2].Size != 1<<20 {
		t.Errorf("a file at the cap: %+v", res[2])
	}
	if !strings.Contains(res[0].Err.Error(), "FILES_MAX_FILE_MB") {
		t.Errorf("the error does not name the setting: %v", res[0].Err)
	}
	for _, p := range []string{"/session/sized", "/session/unsized"} {
		_, err := m.StatFile(ctx, "k", p)
		wantErr(t, p+" kept", err, session.ErrFileNotFound)
	}
	if out := plain(mustExec(t, m, "k", `import os; [n for n in os.listdir("/session") if n.endswith(".part")]`)); out != "[]" {
		t.Errorf("parts left behind: %s", out)
	}
	mb := big[:1<<20]
	res, err = m.WriteFiles(ctx, "k", []session.FileWrite{
		{Path: "one", Data: bytes.NewReader(mb)},
		{Path: "two", Data: io.MultiReader(bytes.NewReader(mb[:3<<18]))},
		{Path: "three", Data: io.MultiReader(bytes.NewReader(mb[:3<<18]))}, // crosses the cap midway
		{Path: "four", Data: strings.NewReader("x")},                       // after the cap is reached
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("two files under the call's cap: %+v, %v", res, err)
	}
	wantErr(t, "a file past the call's cap", res[2].Err, session.ErrFileTooLarge)
	wantErr(t, "a file after the call's cap", res[3].Err, session.ErrFileTooLarge)
	if _, err := m.StatFile(ctx, "k", "/session/three"); !errors.Is(err, session.ErrFileNotFound) {
		t.Errorf("a file cut at the call's cap was kept: %v", err)
	}
	if !strings.Contains(res[2].Err.Error(), "FILES_MAX_CALL_MB") {
		t.Errorf("the error does not name the setting: %v", res[2].Err)
	}
	mustExec(t, m, "k", `open("/session/big", "wb").write(b"y" * (3 << 19))`)
	_, err = m.ReadFile(ctx, "k", "/session/big", 0, -1)
	wantErr(t, "read a file over the cap", err, session.ErrFileTooLarge)
	if got := readAll(t, m, "k", "/session/big", 1<<19, 1<<20); len(got) != 1<<20 {
		t.Errorf("read a part at the cap: %d bytes", len(got))
	}
}

// TestFilesSessionFull: a full /session (a 16 MiB tmpfs) is ErrNoSpace,
// leaves no part behind, and the next write that fits works.
func TestFilesSessionFull(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.TmpfsSizeMB = 16 })
	ctx := context.Background()
	_, err := m.WriteFile(ctx, "k", "/session/huge", io.LimitReader(zeros{}, 32<<20), 0)
	wantErr(t, "a file larger than /session", err, session.ErrNoSpace)
	if out := plain(mustExec(t, m, "k", `import os; sorted(os.listdir("/session"))`)); out != "['app', 'artifacts', 'data', 'workspace']" {
		t.Errorf("/session after a full write: %s", out)
	}
	if _, err := m.WriteFile(ctx, "k", "/session/small", strings.NewReader("fits"), 0); err != nil {
		t.Errorf("a write after the full one: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestFilesBesideExec: a file operation does not wait for a running
// execution, nor disturb its state.
func TestFilesBesideExec(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := context.Background()
	mustExec(t, m, "k", "x = 41")
	done := make(chan error, 1)
	go func() {
		_, err := m.Exec(ctx, "k", `import time
while not __import__("os").path.exists("/session/go"): time.sleep(0.05)
x += 1`)
		done <- err
	}()
	time.Sleep(500 * time.Millisecond) // let the execution start
	if _, err := m.WriteFile(ctx, "k", "/session/go", strings.NewReader(""), 0); err != nil {
		t.Fatal(err)
	}
	// The execution waits for that file: it can only end if the write ran
	// while it was running.
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the execution never saw the file: the write waited for it")
	}
	if out := plain(mustExec(t, m, "k", "x")); out != "42" {
		t.Errorf("x = %s after the write", out)
	}
}

// TestFilesPaused: a paused session's files are not reachable, and the
// error says why; once thawed, the same call works.
func TestFilesPaused(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := context.Background()
	mustExec(t, m, "k", "y = 7")
	id := containerOf(t, m, "k")
	dockerCLI(t, "pause", id)
	_, err := m.WriteFile(ctx, "k", "/session/a", strings.NewReader("x"), 0)
	if !errors.Is(err, session.ErrPaused) {
		t.Errorf("write in a paused session: %v, want ErrPaused", err)
	}
	_, err = m.ReadFile(ctx, "k", "/session/a", 0, -1)
	wantErr(t, "read in a paused session", err, session.ErrPaused)
	dockerCLI(t, "unpause", id)
	if _, err := m.WriteFile(ctx, "k", "/session/a", strings.NewReader("x"), 0); err != nil {
		t.Errorf("write after unpause: %v", err)
	}
	if out := plain(mustExec(t, m, "k", "y")); out != "7" {
		t.Errorf("y = %s after the pause", out)
	}
}

func dockerCLI(t *testing.T, args ...string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		out, err := exec.Command("docker", args...).CombinedOutput()
		if errors.Is(err, exec.ErrNotFound) {
			t.Skip("no docker command to pause a container with")
		}
		// runc's cgroup v1 freezer gives up now and then on a loaded
		// machine and leaves the container running; the driver's Pause
		// tries again, and so does this (a few times).
		if err != nil && attempt < 4 && strings.Contains(string(out), "unable to freeze") {
			time.Sleep(time.Duration(attempt) * 250 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return
	}
}
