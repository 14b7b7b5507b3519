package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

func TestNoKeySaysHowToSetOne(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), nil, func(string) (string, bool) { return "", false }, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "OPENAI_API_KEY") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestAgentLoopWithScriptedModel runs the loop against a scripted
// OpenAI-compatible server (no network) and a real sandbox: the model asks
// for code, sees its output, and answers.
func TestAgentLoopWithScriptedModel(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	dir := t.TempDir()
	t.Setenv("SANDBOX_IMAGE", image)
	t.Setenv("ARTIFACTS_DB", filepath.Join(dir, "artifacts.db"))
	t.Setenv("BLOBSTORE_DIR", filepath.Join(dir, "blobstore"))
	t.Setenv("SESSIONS_ROOT", filepath.Join(dir, "sessions"))
	var b [4]byte
	rand.Read(b[:])
	ns := "t-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { dockertest.Sweep(context.Background(), cli, session.LabelNamespace+"="+ns) })

	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []message `json:"messages"`
			Tools    []toolSpec
		}
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		defer mu.Unlock()
		last := req.Messages[len(req.Messages)-1]
		seen = append(seen, last.Role)
		var reply message
		if last.Role == "user" {
			reply = message{Role: "assistant", ToolCalls: []toolCall{{ID: "call_1", Type: "function"}}}
			reply.ToolCalls[0].Function.Name = "code_sandbox"
			reply.ToolCalls[0].Function.Arguments = `{"code": "x = 6 * 7\nprint(x)"}`
		} else {
			reply = message{Role: "assistant", Content: "The sandbox says: " + strings.TrimSpace(last.Content)}
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": reply}}})
	}))
	defer srv.Close()

	env := map[string]string{"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": srv.URL, "AGENTBOX_NAMESPACE": ns}
	lookup := func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"what is 6*7?"}, lookup, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "42") || !strings.Contains(out.String(), "[tool code_sandbox]") {
		t.Fatalf("output:\n%s", out.String())
	}
	if len(seen) != 2 || seen[1] != "tool" {
		t.Fatalf("model saw %v", seen)
	}
}
