package mcpserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/server/mcpserver"
	"github.com/agentbox/agentbox/server/tenant"
)

// TestSessionChoice: the session argument wins; without it the
// X-Agentbox-Session header names the session, so clients that open an
// MCP session per tool call keep their state; without either, each MCP
// session is its own sandbox session.
func TestSessionChoice(t *testing.T) {
	m := engineManager(t)
	srv := httpServer(t, m, mcpserver.Options{})
	hdr := http.Header{mcpserver.SessionHeader: {"thread-7"}}

	first := httpClient(t, srv, "", hdr)
	want(t, first, "run_python", args("code", "v = 'from the header'"), false)
	first.Close()
	// A new MCP session with the same header: the same sandbox session.
	second := httpClient(t, srv, "", hdr)
	want(t, second, "run_python", args("code", "print(v)"), false, "from the header")
	// The argument beats the header.
	want(t, second, "run_python", args("code", "print(v)", "session", "elsewhere"), false, "NameError")
	// The argument names the header's session as well as any.
	want(t, second, "run_python", args("code", "print(v)", "session", "thread-7"), false, "from the header")

	// No argument, no header: the MCP session is the sandbox session.
	plain := httpClient(t, srv, "", nil)
	want(t, plain, "run_python", args("code", "w = 'mine'"), false)
	want(t, plain, "run_python", args("code", "print(w)"), false, "mine")
	other := httpClient(t, srv, "", nil)
	want(t, other, "run_python", args("code", "print(w)"), false, "NameError")

	// A header that cannot name a session is a tool error.
	bad := httpClient(t, srv, "", http.Header{mcpserver.SessionHeader: {strings.Repeat("h", 600)}})
	want(t, bad, "run_python", args("code", "1"), true, "X-Agentbox-Session header is 600 bytes long")
	// ... unless the argument names the session.
	want(t, bad, "run_python", args("code", "print('ok')", "session", "fine"), false, "ok")
}

// TestAuth: with keys configured, a request without a bearer key or with
// an unknown one is refused with 401 before any MCP handling, and a key
// cannot use an MCP session another key opened; a known key works.
func TestAuth(t *testing.T) {
	m := engineManager(t)
	srv := httpServer(t, m, mcpserver.Options{Keys: tenant.NewKeys([]string{"key-a", "key-b"})})
	for _, tc := range []struct {
		name, authorization string
		want                int
	}{
		{"no header", "", http.StatusUnauthorized},
		{"wrong key", "Bearer key-c", http.StatusUnauthorized},
		{"not bearer", "Basic a2V5LWE6", http.StatusUnauthorized},
		{"empty bearer", "Bearer ", http.StatusUnauthorized},
		{"key as prefix", "Bearer key-", http.StatusUnauthorized},
		{"right key", "Bearer key-a", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusOf(t, srv, tc.authorization); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}
	if _, err := httpConnect(context.Background(), srv, "key-c", nil); err == nil {
		t.Error("an MCP client with an unknown key connected")
	}
	if _, err := httpConnect(context.Background(), srv, "", nil); err == nil {
		t.Error("an MCP client without a key connected")
	}
	a := httpClient(t, srv, "key-a", nil)
	want(t, a, "run_python", args("code", "print('authorized')", "session", "s"), false, "authorized")

	// Key B sending A's MCP session id is refused by the transport.
	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(1)"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer key-b")
	req.Header.Set("Mcp-Session-Id", a.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("key B on key A's MCP session: status %d, want %d", res.StatusCode, http.StatusForbidden)
	}
}

// TestTenantIsolation: two keys naming the same session reach two
// sandboxes: neither sees the other's variables or files.
func TestTenantIsolation(t *testing.T) {
	m := engineManager(t)
	srv := httpServer(t, m, mcpserver.Options{Keys: tenant.NewKeys([]string{"key-a", "key-b"})})
	a := httpClient(t, srv, "key-a", nil)
	b := httpClient(t, srv, "key-b", nil)
	want(t, a, "run_python", args("code", "x = 'A'", "session", "s"), false)
	want(t, a, "write_file", args("path", "who.txt", "content", "A", "session", "s"), false)
	want(t, b, "run_python", args("code", "print(x)", "session", "s"), false, "NameError")
	want(t, b, "read_file", args("path", "who.txt", "session", "s"), true, "no such file")
	want(t, b, "run_python", args("code", "x = 'B'", "session", "s"), false)
	want(t, a, "run_python", args("code", "print(x)", "session", "s"), false, "stdout:\nA\n")
	want(t, a, "read_file", args("path", "who.txt", "session", "s"), false, "who.txt (1 B):\nA")
	// B resetting its "s" leaves A's alone.
	want(t, b, "reset_session", args("session", "s"), false, "was reset")
	want(t, a, "run_python", args("code", "print(x)", "session", "s"), false, "stdout:\nA\n")
	// The header is namespaced by the tenant too.
	ha := httpClient(t, srv, "key-a", http.Header{mcpserver.SessionHeader: {"s"}})
	want(t, ha, "run_python", args("code", "print(x)"), false, "stdout:\nA\n")
	hb := httpClient(t, srv, "key-b", http.Header{mcpserver.SessionHeader: {"s"}})
	want(t, hb, "run_python", args("code", "print(x)"), false, "NameError")
}
