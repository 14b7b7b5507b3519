package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/session"
)

// checkBindFiles checks the files BIND mode writes for key after n
// executions, the last of which defined want in the namespace.
func checkBindFiles(t *testing.T, root, key string, n int, want string) {
	t.Helper()
	dir := filepath.Join(root, session.ID(key))
	f, err := os.Open(filepath.Join(dir, session.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []session.LogEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e session.LogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("session.log line %q: %v", sc.Text(), err)
		}
		lines = append(lines, e)
	}
	if len(lines) != n {
		t.Fatalf("session.log has %d lines, want %d", len(lines), n)
	}
	var md session.Metadata
	readJSON(t, filepath.Join(dir, session.MetadataFile), &md)
	if md.Key != key || md.ExecutionCount != n || md.Container == "" || md.Limits["memory_mb"] == "" {
		t.Fatalf("session_metadata.json: %+v", md)
	}
	var st struct {
		Variables []struct{ Name string } `json:"variables"`
	}
	readJSON(t, filepath.Join(dir, session.StateFile), &st)
	for _, v := range st.Variables {
		if v.Name == want {
			return
		}
	}
	t.Fatalf("python_state.json lacks %s: %+v", want, st)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestBindStorage(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.SessionStorage = config.StorageBind })
	ns := namespace()
	m := managerFor(t, cfg, ns)
	mustExec(t, m, "b", "open('/session/hello.txt', 'w').write('hi')")
	res := mustExec(t, m, "b", "import os\nnames = sorted(os.listdir('/session'))\nprint(names)")
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	host := filepath.Join(cfg.SessionsRoot, session.ID("b"), session.WorkspaceDir, "hello.txt")
	if data, err := os.ReadFile(host); err != nil || string(data) != "hi" {
		t.Fatalf("file written in the sandbox not on the host: %q %v", data, err)
	}
	checkBindFiles(t, cfg.SessionsRoot, "b", 2, "names")
	// The host's records are not in the sandbox's /session: what the code
	// sees is the workspace, with the folders it is told to use.
	if got := res.Stdout; got != "['app', 'artifacts', 'data', 'hello.txt', 'workspace']\n" {
		t.Fatalf("/session holds %s, want the workspace alone", got)
	}

	// The folder outlives the container: a new session of the key finds it.
	if err := m.Stop(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	res = mustExec(t, m, "b", "print(open('/session/hello.txt').read())")
	if res.Stdout != "hi\n" {
		t.Fatalf("after stop: %+v", res)
	}
}

// TestBindRecordsOutOfReach: code in a BIND session plants, at the names of
// every record the host writes, a link to an existing host file, a link to
// a missing host path, a FIFO, and a folder, everywhere it can reach. The
// host must not write through any of them, must not block, and must keep
// writing its records where the sandbox cannot reach them. Before, the host
// appended session.log through the link as root, creating or extending any
// host file with content the code chose.
func TestBindRecordsOutOfReach(t *testing.T) {
	t.Parallel()
	records := []string{session.LogFile, session.MetadataFile, session.StateFile, session.DatasetsFile}
	kinds := []string{"link to a host file", "link to a missing host path", "fifo", "folder"}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, func(c *config.Config) {
				c.SessionStorage = config.StorageBind
				c.DatasetAccess = config.AccessAPI
			})
			m := managerFor(t, cfg, namespace(), session.WithFetcher(datasets.FetcherFunc(func(ctx context.Context, _ datasets.Request) (io.ReadCloser, error) {
				return io.NopCloser(strings.NewReader("a,b\n1,2\n")), nil
			})))
			victims := t.TempDir()
			os.Chmod(victims, 0o755)
			existing := filepath.Join(victims, "existing")
			if err := os.WriteFile(existing, []byte("host data\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			mustExec(t, m, "b", "x = 1")
			var plant strings.Builder
			plant.WriteString("import os\nplanted = []\n")
			for _, name := range records {
				for _, at := range []string{"/session/" + name, "/session/artifacts/" + name, "/session/data/" + name} {
					fmt.Fprintf(&plant, "p = %q\n", at)
					plant.WriteString("os.makedirs(os.path.dirname(p), exist_ok=True)\n")
					plant.WriteString("if os.path.lexists(p):\n    os.rmdir(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)\n")
					switch kind {
					case "link to a host file":
						fmt.Fprintf(&plant, "os.symlink(%q, p)\n", existing)
					case "link to a missing host path":
						fmt.Fprintf(&plant, "os.symlink(%q, p)\n", filepath.Join(victims, "created-"+name))
					case "fifo":
						plant.WriteString("os.mkfifo(p)\n")
					case "folder":
						plant.WriteString("os.mkdir(p)\n")
					}
					plant.WriteString("planted.append(p)\n")
				}
			}
			plant.WriteString("print(len(planted))")
			res := mustExec(t, m, "b", plant.String())
			if res.Error != nil || strings.TrimSpace(res.Stdout) != fmt.Sprint(3*len(records)) {
				t.Fatalf("planting failed: %+v %s", res.Error, res.Stderr)
			}
			// Every record is written again by these: an execution (log,
			// metadata, state), a dataset status (cache_datasets.json), a
			// new process reattaching (metadata).
			done := make(chan struct{})
			go func() {
				defer close(done)
				mustExec(t, m, "b", `print("$(id) written by the sandbox")`)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if _, err := m.SelectDataset(ctx, "b", "d.csv"); err != nil {
					t.Errorf("select a dataset: %v", err)
				}
				mustExec(t, m, "b", "x")
			}()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				t.Fatal("the host blocked on what the sandbox planted")
			}
			if data, err := os.ReadFile(existing); err != nil || string(data) != "host data\n" {
				t.Fatalf("host file changed through a link the sandbox planted: %q, %v", data, err)
			}
			if left, _ := filepath.Glob(filepath.Join(victims, "created-*")); len(left) > 0 {
				t.Fatalf("host files created through links the sandbox planted: %v", left)
			}
			// The host's records are intact, out of the sandbox's reach.
			checkBindFiles(t, cfg.SessionsRoot, "b", 4, "x")
			if _, err := os.Lstat(filepath.Join(cfg.SessionsRoot, session.ID("b"), session.DatasetsFile)); err != nil {
				t.Fatalf("cache_datasets.json not written: %v", err)
			}
		})
	}
}

// TestBindOldLayoutMigrates: a session folder of the old layout (the whole
// folder was /session, records among the code's files) becomes the
// workspace of the new one; the code finds its files where it left them,
// and a link the old session planted at a record's name is never written
// through.
func TestBindOldLayoutMigrates(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.SessionStorage = config.StorageBind })
	old := filepath.Join(cfg.SessionsRoot, session.ID("o"))
	if err := os.MkdirAll(filepath.Join(old, "artifacts"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(old, 0o777)
	os.WriteFile(filepath.Join(old, "notes.txt"), []byte("kept"), 0o666)
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("host data\n"), 0o644)
	os.Symlink(victim, filepath.Join(old, session.LogFile))
	os.Chown(old, 1000, 1000)
	m := managerFor(t, cfg, namespace())
	res := mustExec(t, m, "o", "y = open('/session/notes.txt').read()\nprint(y)")
	if res.Stdout != "kept\n" {
		t.Fatalf("old files not found after the move: %+v", res)
	}
	if data, _ := os.ReadFile(victim); string(data) != "host data\n" {
		t.Fatalf("host file written through the old layout's link: %q", data)
	}
	checkBindFiles(t, cfg.SessionsRoot, "o", 1, "y")
}
