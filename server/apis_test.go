package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/server/tenant"
)

// TestAPIsTogether drives agentbox serve's APIs as its clients do, through
// one server: the OpenSandbox SDK's path (create, resolve the endpoint,
// then execd at the address and with the header the endpoint gave: a
// command, then code whose variables persist), the native API on the same
// sandbox's session from another tenant's view (404), and MCP's key check.
// Each API has its own suite; this one pins that they are wired together:
// the endpoint's path is where execd is mounted, its token opens execd, and
// every API is mounted where its clients look.
func TestAPIsTogether(t *testing.T) {
	cfg := testConfig(t)
	ns := namespace()
	m := manager(t, cfg, ns)
	keys := tenant.NewKeys([]string{"key-a-0123456789abcdef", "key-b-0123456789abcdef"})
	tokens := tenant.NewTokens(bytes.Repeat([]byte("k"), 32))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, cfg, m, server.APIs(m, cfg, keys, tokens, nil, nil), server.Options{Keys: keys, Listener: ln})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()

	do := func(method, url string, header map[string]string, body string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(data)
	}
	keyA := map[string]string{"OPEN-SANDBOX-API-KEY": "key-a-0123456789abcdef"}

	code, _, body := do("POST", base+"/v1/sandboxes", keyA, `{"image": {"uri": "python:3.11"}, "timeout": null}`)
	if code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, body)
	}
	var sb struct{ ID string }
	if err := json.Unmarshal([]byte(body), &sb); err != nil || sb.ID == "" {
		t.Fatalf("create answered %s", body)
	}
	code, _, body = do("GET", base+"/v1/sandboxes/"+sb.ID+"/endpoints/44772", keyA, "")
	var ep struct {
		Endpoint string
		Headers  map[string]string
	}
	if err := json.Unmarshal([]byte(body), &ep); code != 200 || err != nil || ep.Endpoint == "" {
		t.Fatalf("endpoint: %d %s", code, body)
	}
	execd := "http://" + ep.Endpoint
	if code, _, body := do("GET", execd+"/ping", ep.Headers, ""); code != 200 {
		t.Fatalf("execd ping at the endpoint with its headers: %d %s", code, body)
	}
	if code, _, _ := do("GET", execd+"/ping", nil, ""); code != http.StatusUnauthorized {
		t.Errorf("execd ping without the endpoint's token: %d, want 401", code)
	}
	code, _, body = do("POST", execd+"/command", ep.Headers, `{"command": "echo from-the-shell > /session/note.txt && cat /session/note.txt"}`)
	if code != 200 || !strings.Contains(body, "from-the-shell") {
		t.Fatalf("execd command: %d %s", code, body)
	}
	for i, c := range []struct{ code, want string }{
		{`n = 41`, ""},
		{`n + 1`, `42`},
		{`open('/session/note.txt').read().strip()`, `from-the-shell`},
	} {
		q, _ := json.Marshal(map[string]any{"code": c.code, "context": map[string]string{"language": "python"}})
		code, _, body := do("POST", execd+"/code", ep.Headers, string(q))
		if code != 200 || !strings.Contains(body, c.want) || strings.Contains(body, `"type":"error"`) {
			t.Fatalf("code %d (%s): %d %s, want %q", i, c.code, code, body, c.want)
		}
	}

	// The native API: tenant A's own view of a session of its own, and the
	// OpenAPI document; tenant B does not see A's sandbox on any API.
	bearerA := map[string]string{"Authorization": "Bearer key-a-0123456789abcdef"}
	if code, _, body := do("POST", base+"/v1/agentbox/sessions/s1/executions", bearerA, `{"code": "6 * 7", "id": "call-1"}`); code != 200 || !strings.Contains(body, "42") {
		t.Errorf("native execution: %d %s", code, body)
	}
	if code, _, body := do("GET", base+"/v1/agentbox/openapi.yaml", nil, ""); code != 200 || !strings.Contains(body, "openapi:") {
		t.Errorf("OpenAPI document: %d %.80s", code, body)
	}
	keyB := map[string]string{"OPEN-SANDBOX-API-KEY": "key-b-0123456789abcdef"}
	if code, _, body := do("GET", base+"/v1/sandboxes/"+sb.ID, keyB, ""); code != http.StatusNotFound {
		t.Errorf("tenant B gets tenant A's sandbox: %d %s, want 404", code, body)
	}
	if code, _, body := do("GET", base+"/v1/sandboxes/"+sb.ID+"/endpoints/44772", keyB, ""); code != http.StatusNotFound {
		t.Errorf("tenant B resolves tenant A's endpoint: %d %s, want 404", code, body)
	}

	// MCP answers at /mcp, and only to a key.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	mcpHeaders := map[string]string{"Accept": "application/json, text/event-stream"}
	if code, _, _ := do("POST", base+"/mcp", mcpHeaders, init); code != http.StatusUnauthorized {
		t.Errorf("MCP without a key: %d, want 401", code)
	}
	mcpHeaders["Authorization"] = "Bearer key-a-0123456789abcdef"
	if code, _, body := do("POST", base+"/mcp", mcpHeaders, init); code != 200 || !strings.Contains(body, "serverInfo") {
		t.Errorf("MCP initialize with a key: %d %s", code, body)
	}

	if code, _, body := do("DELETE", base+"/v1/sandboxes/"+sb.ID, keyA, ""); code != http.StatusNoContent {
		t.Errorf("delete: %d %s", code, body)
	}
	if code, _, _ := do("GET", execd+"/ping", ep.Headers, ""); code != http.StatusNotFound {
		t.Errorf("execd of a deleted sandbox: %d, want 404", code)
	}
}
