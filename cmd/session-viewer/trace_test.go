package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/session"
)

const (
	traceA = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceB = "0af7651916cd43dd8448eb211c80319c"
)

// tracedHistory records a stopped session with two executions, the first
// traced, the second not.
func tracedHistory(t *testing.T, key string) (*store.Store, string) {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, os.Getenv("ARTIFACTS_DB"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ns, id := os.Getenv(namespaceEnv), session.ID(key)
	t0 := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	if err := st.PutSession(ctx, store.Session{Namespace: ns, ID: id, Key: key, ContainerID: "0123456789abcdef0123",
		Image: "agentbox-sandbox:latest", Storage: "TMPFS", Created: t0, LastUsed: t0}); err != nil {
		t.Fatal(err)
	}
	for i, tid := range []string{traceA, ""} {
		if err := st.RecordExecution(ctx, &store.Execution{Namespace: ns, SessionID: id, SessionKey: key,
			ExecID: "e" + string(rune('1'+i)), ExecutionCount: i + 1, Code: "pass", TraceID: tid,
			Started: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.StopSession(ctx, ns, id, t0.Add(10*time.Minute), "stopped"); err != nil {
		t.Fatal(err)
	}
	return st, id
}

// checkTraceText checks that the text view shows the trace id under the
// traced execution's header, and no trace line for the other.
func checkTraceText(t *testing.T, out string) {
	t.Helper()
	if strings.Count(out, "\n  trace ") != 1 {
		t.Errorf("want one trace line, got:\n%s", out)
	}
	if !strings.Contains(out, "\n  trace "+traceA+"\n  code:\n") {
		t.Errorf("the traced execution does not show %s under its header:\n%s", traceA, out)
	}
	if i, j := strings.Index(out, "[1]  e1"), strings.Index(out, "[2]  e2"); i < 0 || j < 0 || !strings.Contains(out[i:j], traceA) {
		t.Errorf("the trace line is not e1's:\n%s", out)
	}
}

// checkTraceJSON checks the --json view: trace_id on the traced execution,
// absent on the other.
func checkTraceJSON(t *testing.T, out string) {
	t.Helper()
	var v struct {
		Executions []map[string]any `json:"executions"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(v.Executions) != 2 {
		t.Fatalf("want 2 executions, got %d", len(v.Executions))
	}
	if got := v.Executions[0]["trace_id"]; got != traceA {
		t.Errorf("--json: e1 trace_id = %v, want %s", got, traceA)
	}
	if got, ok := v.Executions[1]["trace_id"]; ok {
		t.Errorf("--json: e2 has trace_id %v, want none", got)
	}
}

// TestKeyTraceID shows the trace ids the history recorded, in text, in
// --json and in --follow.
func TestKeyTraceID(t *testing.T) {
	isolate(t)
	offline(t)
	st, id := tracedHistory(t, "traced")
	r := viewer(t, "--no-state", "traced")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkTraceText(t, r.stdout)
	r = viewer(t, "--json", "--no-state", "traced")
	if r.code != exitOK {
		t.Fatalf("--json: exit %d: %s", r.code, r.stderr)
	}
	checkTraceJSON(t, r.stdout)

	for i, asJSON := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr syncBuffer
		done := make(chan int)
		args := []string{"--follow", "--no-state", "traced"}
		want := "\n  trace " + traceB + "\n"
		if asJSON {
			args = append(args, "--json")
			want = `"trace_id":"` + traceB + `"`
		}
		go func() { done <- run(ctx, args, nil, &stdout, &stderr) }()
		time.Sleep(700 * time.Millisecond)
		if err := st.RecordExecution(t.Context(), &store.Execution{Namespace: os.Getenv(namespaceEnv), SessionID: id, SessionKey: "traced",
			ExecID: "new" + string(rune('0'+i)), ExecutionCount: 3 + i, Code: "pass", Started: time.Now(), TraceID: traceB}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(stdout.String(), want) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--follow (json %v) lacks %q:\n%s", asJSON, want, stdout.String())
		}
	}
}

// TestDirTraceID shows the trace ids session.log recorded.
func TestDirTraceID(t *testing.T) {
	dir := bindFolder(t)
	// Replace the folder's log with one traced and one untraced line.
	if err := os.Remove(dir + "/" + session.LogFile); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	appendLog(t, dir,
		session.LogEntry{Time: t0, ID: "e1", ExecutionCount: 1, Code: "pass", TraceID: traceA},
		session.LogEntry{Time: t0.Add(time.Minute), ID: "e2", ExecutionCount: 2, Code: "pass"})
	r := viewer(t, "--no-state", "--dir", dir)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkTraceText(t, r.stdout)
	r = viewer(t, "--json", "--no-state", "--dir", dir)
	if r.code != exitOK {
		t.Fatalf("--json: exit %d: %s", r.code, r.stderr)
	}
	checkTraceJSON(t, r.stdout)
}
