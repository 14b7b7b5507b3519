package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/config"
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
	host := filepath.Join(cfg.SessionsRoot, session.ID("b"), "hello.txt")
	if data, err := os.ReadFile(host); err != nil || string(data) != "hi" {
		t.Fatalf("file written in the sandbox not on the host: %q %v", data, err)
	}
	checkBindFiles(t, cfg.SessionsRoot, "b", 2, "names")

	// The folder outlives the container: a new session of the key finds it.
	if err := m.Stop(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	res = mustExec(t, m, "b", "print(open('/session/hello.txt').read())")
	if res.Stdout != "hi\n" {
		t.Fatalf("after stop: %+v", res)
	}
}
