package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/store"
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

	// The server speaks the chat completions API as the OpenAI client
	// sends and reads it.
	type toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	type message struct {
		Role       string     `json:"role"`
		Content    string     `json:"content"`
		ToolCalls  []toolCall `json:"tool_calls,omitempty"`
		ToolCallID string     `json:"tool_call_id,omitempty"`
	}
	var mu sync.Mutex
	var seen []string
	var tools []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string    `json:"model"`
			Messages []message `json:"messages"`
			Tools    []struct {
				Type     string `json:"type"`
				Function struct {
					Name       string         `json:"name"`
					Parameters map[string]any `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		if r.URL.Path != "/chat/completions" || r.Header.Get("Authorization") != "Bearer test" {
			http.Error(w, "unexpected request "+r.URL.Path, http.StatusNotFound)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, fmt.Sprint("bad request: ", err), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		last := req.Messages[len(req.Messages)-1]
		seen = append(seen, last.Role)
		tools = tools[:0]
		for _, tl := range req.Tools {
			if tl.Type == "function" && tl.Function.Parameters["type"] == "object" {
				tools = append(tools, tl.Function.Name)
			}
		}
		var reply message
		if last.Role == "user" {
			reply = message{Role: "assistant", ToolCalls: []toolCall{{ID: "call_1", Type: "function"}}}
			reply.ToolCalls[0].Function.Name = "code_sandbox"
			reply.ToolCalls[0].Function.Arguments = `{"code": "x = 6 * 7\nprint(x)"}`
		} else {
			reply = message{Role: "assistant", Content: "The sandbox says: " + strings.TrimSpace(last.Content)}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": reply}},
		})
	}))
	defer srv.Close()

	t.Setenv("AGENTBOX_NAMESPACE", ns) // read by the configuration, as every setting
	env := map[string]string{"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": srv.URL}
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
	if !slices.Contains(tools, "code_sandbox") {
		t.Errorf("the model was offered %v, want code_sandbox among them", tools)
	}
	st, err := store.Open(context.Background(), filepath.Join(dir, "artifacts.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rows, err := st.Sessions(context.Background(), ns); err != nil || len(rows) != 1 || rows[0].StopReason != "stopped" {
		t.Errorf("sessions of AGENTBOX_NAMESPACE=%s: %+v, %v; want the chat's, stopped at the end", ns, rows, err)
	}
}
