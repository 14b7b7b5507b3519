package session_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
)

// TestSDKPathsWritable: the folders programs written for OpenSandbox, E2B
// and LangGraph-Sandbox write to (/app, /workspace, the sandbox user's
// home, /tmp) take files through the files API, run them as scripts,
// give them back, list them, and take the code's own writes, in both
// storage modes; the root stays read-only, with an error that says so
// (issue 24 row 4). Before, /app and /workspace refused every write.
func TestSDKPathsWritable(t *testing.T) {
	t.Parallel()
	storages(t, func(t *testing.T, s config.Storage) {
		m := newManager(t, withStorage(s))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		home := runInSession(t, m, "k", `printf %s "$HOME"`).Stdout
		if !strings.HasPrefix(home, "/") {
			t.Fatalf("HOME is %q", home)
		}
		for _, dir := range []string{"/app", "/workspace", home, "/tmp"} {
			file := strings.TrimSuffix(dir, "/") + "/script.py"
			body := "print('ran', __file__)\n"
			res, err := m.WriteFiles(ctx, "k", []session.FileWrite{{Path: file, Data: strings.NewReader(body)}})
			if err != nil || res[0].Err != nil {
				t.Errorf("write %s: %v %+v", file, err, res)
				continue
			}
			if c := runInSession(t, m, "k", "python "+file); c.ExitCode != 0 || c.Stdout != "ran "+file+"\n" {
				t.Errorf("python %s: exit %d, stdout %q, stderr %q", file, c.ExitCode, c.Stdout, c.Stderr)
			}
			if c := runInSession(t, m, "k", "cd "+dir+" && python script.py"); c.ExitCode != 0 {
				t.Errorf("cd %s && python script.py: exit %d, stderr %q", dir, c.ExitCode, c.Stderr)
			}
			if got := readAll(t, m, "k", file, 0, -1); got != body {
				t.Errorf("read back %s: %q", file, got)
			}
			l, err := m.ListFiles(ctx, "k", dir, session.ListOptions{})
			if err != nil {
				t.Errorf("list %s: %v", dir, err)
			} else if !slicesContainsPath(l.Entries, file) {
				t.Errorf("list %s lacks %s: %+v", dir, file, l.Entries)
			}
			// The code's own writes land there too.
			out := mustExec(t, m, "k", "open("+pyQuote(dir+"/from-code.txt")+", 'w').write('x')\nprint(open("+pyQuote(dir+"/from-code.txt")+").read())")
			if out.Error != nil || out.Stdout != "x\n" {
				t.Errorf("code writing under %s: %+v", dir, out)
			}
		}
		// The root stays read-only, and the refusal says why.
		for _, file := range []string{"/usr/script.py", "/etc/agentbox-test", "/script.py"} {
			res, err := m.WriteFiles(ctx, "k", []session.FileWrite{{Path: file, Data: strings.NewReader("x")}})
			if err == nil && len(res) == 1 {
				err = res[0].Err
			}
			wantErr(t, "write "+file, err, session.ErrPermission)
			if err != nil && (!strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), "/workspace")) {
				t.Errorf("write %s: the error does not say the root is read-only and where to write: %v", file, err)
			}
		}
		// The links themselves cannot be removed or replaced.
		if err := m.RemoveFile(ctx, "k", "/app", true); err == nil {
			t.Errorf("remove /app: no error")
		}
		if c := runInSession(t, m, "k", "ls /app/script.py"); c.ExitCode != 0 {
			t.Errorf("/app lost its files: %+v", c)
		}
	})
}

func slicesContainsPath(entries []session.FileInfo, p string) bool {
	for _, e := range entries {
		if e.Path == p {
			return true
		}
	}
	return false
}

// TestPooledBindKeepsSessionFolders: a key whose earlier BIND session left
// files (under /app, at the top of /session, and /session/workspace made a
// file) takes a warm container: its workspace is moved into the warm one,
// which has the empty folders its init made (app, artifacts, data,
// workspace), and every file is where it was. Before, the move stopped at
// the first name both had (renameat: file exists) after moving what came
// before it in the folder's order: the warm container was dropped, and the
// cold one started without those files.
func TestPooledBindKeepsSessionFolders(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) {
		c.SessionStorage = config.StorageBind
		c.SessionDiskMB = 0 // workspaces are moved, not mounted disks
		c.PoolSize = 1
	})
	ns := namespace()
	var logs syncBuffer
	m := managerFor(t, cfg, ns, session.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := m.WriteFiles(ctx, "k", []session.FileWrite{{Path: "/app/a.py", Data: strings.NewReader("print('a')\n")}}); err != nil {
		t.Fatal(err)
	}
	plant := "import shutil\nshutil.rmtree('/session/workspace')\nopen('/session/workspace', 'w').write('a file')\n" +
		"for i in range(50):\n    open('/session/f%02d' % i, 'w').write(str(i))"
	if res := mustExec(t, m, "k", plant); res.Error != nil {
		t.Fatalf("plant: %+v", res.Error)
	}
	if err := m.Stop(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, ns, 1)
	c := runInSession(t, m, "k", "python /app/a.py && cat /session/workspace && echo && ls /session | grep -c '^f[0-9][0-9]$'")
	if c.ExitCode != 0 || c.Stdout != "a\na file\n50\n" {
		t.Errorf("after a pooled restart: exit %d, stdout %q, stderr %q", c.ExitCode, c.Stdout, c.Stderr)
	}
	if strings.Contains(logs.String(), "warm container unusable") {
		t.Errorf("the warm container was not taken:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
