package tools_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
	"github.com/agentbox/agentbox/tools"
)

// These tests run code_sandbox on a real session.Manager, over the in-memory
// driver of package sessiontest (its kernel enforces timeouts and replays a
// known execution id as the real one does), so what the options the tool
// passes do is checked, not how many there are. engine_test.go runs the
// same checks against the Docker engine.

// fakeEngineManager is a Manager on the in-memory driver, with its files
// under a temporary folder.
func fakeEngineManager(t *testing.T) *session.Manager {
	t.Helper()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(sessiontest.NewDriver()))
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m
}

// call runs tl with input as tool call id (none when id is ""), within a
// minute.
func call(t *testing.T, tl tools.Tool, id, input string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if id != "" {
		ctx = tools.WithCallID(ctx, id)
	}
	reply, err := tl.Call(ctx, json.RawMessage(input))
	if err != nil {
		t.Fatalf("call %s: %v", input, err)
	}
	return reply
}

// codeInput is code_sandbox's input for code and, when timeout is not
// empty, timeout_s (as written in JSON).
func codeInput(code, timeout string) string {
	b, _ := json.Marshal(code)
	if timeout == "" {
		return `{"code": ` + string(b) + `}`
	}
	return `{"code": ` + string(b) + `, "timeout_s": ` + timeout + `}`
}

// checkTimeoutSeconds: timeout_s is seconds. Code that sleeps well within
// it finishes (read as milliseconds, it would be interrupted); code that
// sleeps far past it is interrupted soon after it (ignored, it would run
// on to the session's EXEC_TIMEOUT_S).
func checkTimeoutSeconds(t *testing.T, tl tools.Tool, sleep func(seconds string) string) {
	t.Helper()
	reply := call(t, tl, "", codeInput(sleep("1.5")+"\nprint('finished')", "20"))
	if !strings.Contains(reply, "finished") || strings.Contains(reply, "timed out") {
		t.Errorf("1.5 s of work under timeout_s 20 did not finish:\n%s", reply)
	}
	start := time.Now()
	reply = call(t, tl, "", codeInput(sleep("120")+"\nprint('finished')", "1"))
	took := time.Since(start)
	if strings.Contains(reply, "finished") || !strings.Contains(reply, "timed out") {
		t.Errorf("120 s of work under timeout_s 1 was not interrupted:\n%s", reply)
	}
	if took > 30*time.Second {
		t.Errorf("timeout_s 1 took %v to interrupt the code", took)
	}
}

// checkCallIDReplays: a tool call retried with its id returns the recorded
// reply and does not run the code again; another id runs.
func checkCallIDReplays(t *testing.T, tl tools.Tool, incr, show string) {
	t.Helper()
	call(t, tl, "call_setup", codeInput("n = 0", ""))
	first := call(t, tl, "call_1", codeInput(incr, ""))
	if !strings.Contains(first, "stdout:\n1\n") {
		t.Fatalf("first call: %s", first)
	}
	retry := call(t, tl, "call_1", codeInput(incr, ""))
	if !strings.Contains(retry, "stdout:\n1\n") || !strings.Contains(retry, "did not run again") {
		t.Errorf("retried call_1 ran again, or does not say it replayed:\n%s", retry)
	}
	if got := call(t, tl, "call_2", codeInput(show, "")); !strings.Contains(got, "stdout:\n1\n") {
		t.Errorf("n after a retried increment: %s, want 1 (the retry ran the code again)", got)
	}
	if got := call(t, tl, "call_3", codeInput(incr, "")); !strings.Contains(got, "stdout:\n2\n") || strings.Contains(got, "did not run again") {
		t.Errorf("a new call id did not run: %s", got)
	}
}

func TestCodeSandboxTimeoutIsSeconds(t *testing.T) {
	t.Parallel()
	tl := find(t, tools.New(fakeEngineManager(t), tools.Options{}), "code_sandbox")
	checkTimeoutSeconds(t, tl, func(s string) string { return "sleep(" + s + ")" })
}

func TestCodeSandboxCallIDReplays(t *testing.T) {
	t.Parallel()
	tl := find(t, tools.New(fakeEngineManager(t), tools.Options{}), "code_sandbox")
	checkCallIDReplays(t, tl, "n = n + 1; print(n)", "print(n)")
}
