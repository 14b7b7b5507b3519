package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

type outcome struct {
	code           int
	stdout, stderr string
}

func viewer(t *testing.T, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	code := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
	return outcome{code, stdout.String(), stderr.String()}
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendLog(t *testing.T, dir string, entries ...session.LogEntry) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, session.LogFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(append(line, '\n')); err != nil {
			t.Fatal(err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// bindFolder writes a BIND session folder in the documented shapes: the
// records beside workspace/, the sandbox's /session.
func bindFolder(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo-0123456789abcdef")
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	writeJSONFile(t, filepath.Join(dir, session.MetadataFile), session.Metadata{
		Key: "demo", ID: "demo-0123456789abcdef", Container: "0123456789abcdef0123456789abcdef",
		Image: "agentbox-sandbox:latest", Created: t0, LastUsed: t0.Add(3 * time.Minute), ExecutionCount: 4,
		Limits: map[string]string{"memory_mb": "1024", "cpus": "1", "network": "none"},
	})
	var long []string
	for i := 1; i <= 30; i++ {
		long = append(long, fmt.Sprintf("line %d", i))
	}
	appendLog(t, dir,
		session.LogEntry{Time: t0, ID: "e1", ExecutionCount: 1, Code: "import numpy as np\nx = 1", DurationMS: 812.5, Artifacts: []session.Artifact{}},
		session.LogEntry{Time: t0.Add(time.Minute), ID: "e2", ExecutionCount: 2, Code: "for i in range(30): print(f'line {i+1}')",
			Stdout: strings.Join(long, "\n") + "\n", DurationMS: 3.25},
		session.LogEntry{Time: t0.Add(2 * time.Minute), ID: "e3", ExecutionCount: 3, Code: "1/0", Stderr: "warning: careful\n",
			Error: &kernel.Exception{Name: "ZeroDivisionError", Value: "division by zero",
				Traceback: []string{"Cell In[3], line 1", "----> 1 1/0"}}, DurationMS: 1.5},
		session.LogEntry{Time: t0.Add(3 * time.Minute), ID: "e4", ExecutionCount: 4, Code: "plt.savefig('/session/artifacts/plot.png')",
			DurationMS: 1500, Artifacts: []session.Artifact{{ID: "art1", Name: "plot.png", Size: 2048, SHA256: "abc", MIME: "image/png",
				URL: "http://localhost:8000/artifacts/art1?token=T"}}},
	)
	writeJSONFile(t, filepath.Join(dir, session.StateFile), kernel.State{
		Variables: []kernel.Variable{
			{Name: "x", Type: "int", Repr: "1", Size: ptr(int64(28))},
			{Name: "df", Type: "DataFrame", Repr: "   a  b\n0  1  2", Size: ptr(int64(4096)), Shape: []any{100, 2}},
			{Name: "names", Type: "list", Repr: "['a', 'b']", Len: ptr(int64(2))},
		},
		Modules: []kernel.Module{{Name: "np", Module: "numpy"}},
	})
	writeJSONFile(t, filepath.Join(dir, session.DatasetsFile), []datasets.Record{
		{SessionID: "demo-0123456789abcdef", DatasetID: "sales/2024", Name: "sales_2024.parquet", Status: datasets.StatusLoaded,
			Size: 1 << 20, Updated: t0},
		{SessionID: "demo-0123456789abcdef", DatasetID: "missing", Name: "missing", Status: datasets.StatusFailed,
			Reason: "404 not found", Updated: t0},
	})
	return dir
}

var timeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}`)

func mask(s, dir string) string {
	s = strings.ReplaceAll(s, dir, "DIR")
	return timeRE.ReplaceAllString(s, "YYYY-MM-DD hh:mm:ss")
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestDirGolden(t *testing.T) {
	dir := bindFolder(t)
	r := viewer(t, "--dir", dir)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Error("colour written to a non-terminal")
	}
	golden(t, "dir.golden", mask(r.stdout, dir))
}

func TestDirJSON(t *testing.T) {
	dir := bindFolder(t)
	r := viewer(t, "--json", "--dir", dir)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var v struct {
		Session    sessionView    `json:"session"`
		Executions []execView     `json:"executions"`
		State      *kernel.State  `json:"python_state"`
		Datasets   []datasetView  `json:"datasets"`
		Artifacts  []artifactView `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
		t.Error("want one JSON object on one line")
	}
	if v.Session.Key != "demo" || len(v.Executions) != 4 || v.State == nil || len(v.State.Variables) != 3 ||
		len(v.Datasets) != 2 || len(v.Artifacts) != 1 {
		t.Errorf("unexpected view: %+v", v)
	}
	if e := v.Executions[2]; e.Error == nil || e.Error.Name != "ZeroDivisionError" {
		t.Errorf("execution 3: %+v", e)
	}
}

func TestDirLimitAndSkips(t *testing.T) {
	dir := bindFolder(t)
	r := viewer(t, "--dir", dir, "--limit", "2", "--no-state", "--no-artifacts")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"executions (2 of 4, newest last)", "[3]  e3", "[4]  e4"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in\n%s", want, r.stdout)
		}
	}
	for _, not := range []string{"[2]  e2", "python state", "\nartifacts"} {
		if strings.Contains(r.stdout, not) {
			t.Errorf("unexpected %q in\n%s", not, r.stdout)
		}
	}
	r = viewer(t, "--json", "--limit", "1", "--dir", dir)
	var v view
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Executions) != 1 || v.Executions[0].ID != "e4" {
		t.Errorf("--limit 1: %+v", v.Executions)
	}
}

func TestDirFollow(t *testing.T) {
	dir := bindFolder(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- run(ctx, []string{"--follow", "--json", "--dir", dir}, nil, &stdout, &stderr) }()
	time.Sleep(700 * time.Millisecond)
	appendLog(t, dir, session.LogEntry{Time: time.Now(), ID: "e5", ExecutionCount: 5, Code: "print('new')", Stdout: "new\n"})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stdout.String(), `"id":"e5"`) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"id":"e5"`) {
		t.Errorf("want the view then e5, got:\n%s", stdout.String())
	}
}

// isolate points the configuration at a temporary folder and namespace, and
// at no engine unless the test asks for one.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	var b [4]byte
	_, _ = rand.Read(b[:])
	t.Setenv(namespaceEnv, "t-"+hex.EncodeToString(b[:]))
	t.Setenv("ARTIFACTS_DB", filepath.Join(dir, "artifacts.db"))
	t.Setenv("SESSIONS_ROOT", filepath.Join(dir, "sessions"))
	t.Setenv("BLOBSTORE_DIR", filepath.Join(dir, "blobstore"))
	return dir
}

func TestUnknownSession(t *testing.T) {
	isolate(t)
	if r := viewer(t, "no-such-key"); r.code != exitNotFound {
		t.Errorf("unknown key: exit %d, want %d: %s", r.code, exitNotFound, r.stderr)
	}
	if r := viewer(t, "--dir", filepath.Join(t.TempDir(), "nope")); r.code != exitNotFound {
		t.Errorf("missing folder: exit %d, want %d: %s", r.code, exitNotFound, r.stderr)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--bogus"},
		{"--limit", "x"},
		{"--limit", "-1", "k"},
		{"a", "b"},
		{"k", "--dir", "d"},
	} {
		if r := viewer(t, args...); r.code != exitUsage || r.stderr == "" {
			t.Errorf("%q: exit %d (stderr %q), want %d", args, r.code, r.stderr, exitUsage)
		}
	}
	if r := viewer(t, "-h"); r.code != exitOK || !strings.Contains(r.stdout, "usage:") {
		t.Errorf("-h: exit %d: %s", r.code, r.stdout)
	}
}

func TestFold(t *testing.T) {
	var sb strings.Builder
	p := &printer{w: &sb}
	var ls []string
	for i := range 20 {
		ls = append(ls, fmt.Sprint(i))
	}
	p.lines(strings.Join(ls, "\n"), "")
	got := sb.String()
	if !strings.Contains(got, "… 10 lines folded …") || !strings.Contains(got, "    0\n") || !strings.Contains(got, "    19\n") || strings.Contains(got, "    7\n") {
		t.Errorf("fold:\n%s", got)
	}
}

// TestLiveSession runs a real session and views it through the database
// and the engine.
func TestLiveSession(t *testing.T) {
	if testing.Short() {
		t.Skip("engine test")
	}
	dockertest.Engine(t)
	image := dockertest.Image(t)
	dir := isolate(t)
	t.Setenv("SANDBOX_IMAGE", image)
	t.Setenv("SESSION_STORAGE", "BIND")
	t.Setenv("TMPFS_SIZE_MB", "64")
	t.Setenv("SESSION_DISK_MB", "64")
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := os.Getenv(namespaceEnv)
	m, err := session.NewManager(ctx, cfg, session.WithNamespace(ns),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = m.StopAll(ctx)
		_ = m.Close(ctx)
	})
	res, err := m.Exec(ctx, "live key", "answer = 42\nprint('hello')")
	if err != nil || res.Error != nil {
		t.Fatalf("exec: %v %+v", err, res)
	}
	if res, err = m.Exec(ctx, "live key", "answer + 1000"); err != nil || res.Error != nil {
		t.Fatalf("exec: %v %+v", err, res)
	}

	r := viewer(t, "live key")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"session live key", "running", "answer = 42", "hello", "result:\n    1042\n", "python state (live)", "answer"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in\n%s", want, r.stdout)
		}
	}

	r = viewer(t, "--json", "live key")
	var v view
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if v.Session.State != "running" || len(v.Executions) != 2 || v.StateSource != "live" ||
		len(v.Executions[1].Results) != 1 || v.Executions[1].Results[0].Data["text/plain"] != "1042" {
		t.Errorf("json view: %+v", v)
	}

	r = viewer(t)
	if r.code != exitOK || !strings.Contains(r.stdout, "live key") || !strings.Contains(r.stdout, "running") {
		t.Errorf("list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The BIND folder the manager wrote reads without database or engine.
	r = viewer(t, "--dir", filepath.Join(dir, "sessions", session.ID("live key")))
	if r.code != exitOK || !strings.Contains(r.stdout, "answer = 42") || !strings.Contains(r.stdout, "result:\n    1042\n") ||
		!strings.Contains(r.stdout, "python state (python_state.json)") {
		t.Errorf("--dir: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// syncBuffer is a strings.Builder safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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
