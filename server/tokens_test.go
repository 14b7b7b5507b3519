package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/server/opensandbox"
	"github.com/agentbox/agentbox/server/tenant"
)

const (
	tokKeyA = "key-a-0123456789abcdef"
	tokKeyB = "key-b-0123456789abcdef"
)

// tokenEnv is one Manager and one token secret behind servers built as
// agentbox serve builds them: a "restart" with other keys is a new server
// over the same Manager and secret.
type tokenEnv struct {
	t      *testing.T
	serve  func(keys ...string) string // a server with keys; its base URL
	tokens tenant.Tokens
}

func newTokenEnv(t *testing.T, tokens tenant.Tokens) *tokenEnv {
	cfg := testConfig(t)
	m := manager(t, cfg, namespace())
	e := &tokenEnv{t: t, tokens: tokens}
	e.serve = func(keys ...string) string {
		k := tenant.NewKeys(keys)
		srv := httptest.NewServer(server.Handler(server.APIs(m, cfg, k, tokens, nil, nil), server.Policy{Keyless: k.Len() == 0, MaxBody: server.MaxBodyBytes(cfg)}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	return e
}

// do sends a request and returns its status, headers and body.
func (e *tokenEnv) do(method, url string, header map[string]string, body string) (int, http.Header, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	// The client takes Connection out of the header and says it in Close.
	hdr := resp.Header.Clone()
	if resp.Close {
		hdr.Set("Connection", "close")
	}
	return resp.StatusCode, hdr, string(data)
}

// create makes a sandbox of key on base and returns its id.
func (e *tokenEnv) create(base, key string) string {
	e.t.Helper()
	code, _, body := e.do("POST", base+"/v1/sandboxes", map[string]string{opensandbox.APIKeyHeader: key}, `{"image": {"uri": "python:3.11"}, "timeout": null}`)
	var sb struct{ ID string }
	if err := json.Unmarshal([]byte(body), &sb); code != http.StatusAccepted || err != nil || sb.ID == "" {
		e.t.Fatalf("create: %d %s", code, body)
	}
	return sb.ID
}

// endpoint resolves the execd endpoint of sandbox id as the SDK does: its
// URL and the headers (the token) to send there.
func (e *tokenEnv) endpoint(base, key, id string) (string, map[string]string) {
	e.t.Helper()
	code, _, body := e.do("GET", base+"/v1/sandboxes/"+id+"/endpoints/44772", map[string]string{opensandbox.APIKeyHeader: key}, "")
	var ep struct {
		Endpoint string
		Headers  map[string]string
	}
	if err := json.Unmarshal([]byte(body), &ep); code != http.StatusOK || err != nil || ep.Endpoint == "" {
		e.t.Fatalf("endpoint: %d %s", code, body)
	}
	// The endpoint names the Host the request came to: the test server.
	return "http://" + ep.Endpoint, ep.Headers
}

// wantRefused checks a refusal of a token: status, JSON code, a message
// naming the cause, and the connection closed.
func (e *tokenEnv) wantRefused(what string, code int, hdr http.Header, body string, wantCode, wantWord string) {
	e.t.Helper()
	var eb struct{ Code, Message string }
	_ = json.Unmarshal([]byte(body), &eb)
	if code != http.StatusUnauthorized || eb.Code != wantCode || !strings.Contains(eb.Message, wantWord) {
		e.t.Errorf("%s: %d %s, want 401 with code %s and a message saying %q", what, code, body, wantCode, wantWord)
	}
	if code == http.StatusUnauthorized && !strings.EqualFold(hdr.Get("Connection"), "close") {
		e.t.Errorf("%s: 401 without Connection: close", what)
	}
}

// TestTokenOfRevokedKey: a key removed from the keys (serve restarted
// without it, same token secret) takes its sandboxes' execd tokens with
// it, while the remaining key's tokens keep working.
func TestTokenOfRevokedKey(t *testing.T) {
	e := newTokenEnv(t, tenant.NewTokens(bytes.Repeat([]byte("r"), 32)))
	before := e.serve(tokKeyA, tokKeyB)
	idA, idB := e.create(before, tokKeyA), e.create(before, tokKeyB)
	execA, hdrA := e.endpoint(before, tokKeyA, idA)
	execB, hdrB := e.endpoint(before, tokKeyB, idB)
	if code, _, body := e.do("GET", execA+"/ping", hdrA, ""); code != http.StatusOK {
		t.Fatalf("ping with A's token before the restart: %d %s", code, body)
	}

	after := e.serve(tokKeyB)
	rebase := func(u string) string { return after + u[strings.Index(u, "/execd/"):] }
	for _, route := range []struct{ method, path, body string }{
		{"GET", "/ping", ""},
		{"POST", "/command", `{"command": "echo still-here"}`},
		{"POST", "/code", `{"code": "1 + 1"}`},
	} {
		code, hdr, body := e.do(route.method, rebase(execA)+route.path, hdrA, route.body)
		e.wantRefused("A's token after A's key was removed, "+route.method+" "+route.path, code, hdr, body, "KEY_REVOKED", "revoked")
	}
	if code, _, body := e.do("GET", rebase(execB)+"/ping", hdrB, ""); code != http.StatusOK {
		t.Errorf("B's token after A's key was removed: %d %s, want 200", code, body)
	}
}

// TestTokenOfRecreatedSandbox: a sandbox deleted and created again under
// the same name refuses the tokens of the first one; the endpoint hands
// out one that works.
func TestTokenOfRecreatedSandbox(t *testing.T) {
	e := newTokenEnv(t, tenant.NewTokens(bytes.Repeat([]byte("c"), 32)))
	base := e.serve(tokKeyA)
	id := e.create(base, tokKeyA)
	exec, hdr := e.endpoint(base, tokKeyA, id)
	if code, _, body := e.do("GET", exec+"/ping", hdr, ""); code != http.StatusOK {
		t.Fatalf("ping with the first token: %d %s", code, body)
	}
	// The same name again: the OpenSandbox API makes a new id each time,
	// the native API names its sessions.
	bearer := map[string]string{"Authorization": "Bearer " + tokKeyA}
	if code, _, body := e.do("DELETE", base+"/v1/agentbox/sessions/"+id, bearer, ""); code/100 != 2 {
		t.Fatalf("delete %s: %d %s", id, code, body)
	}
	if code, _, body := e.do("POST", base+"/v1/agentbox/sessions/"+id+"/executions", bearer, `{"code": "x = 1"}`); code != http.StatusOK {
		t.Fatalf("recreate %s: %d %s", id, code, body)
	}
	code, rh, body := e.do("POST", exec+"/command", hdr, `{"command": "echo opened"}`)
	e.wantRefused("the first sandbox's token on the second", code, rh, body, "SANDBOX_RECREATED", "created again")

	exec, hdr = e.endpoint(base, tokKeyA, id)
	if code, _, body := e.do("POST", exec+"/command", hdr, `{"command": "echo opened"}`); code != http.StatusOK || !strings.Contains(body, "opened") {
		t.Errorf("the second sandbox's own token: %d %s", code, body)
	}
}

// TestTokenExpiry: a token stops at its TTL (on a clock of the test's),
// says so, and asking for the endpoint again gives one that works.
func TestTokenExpiry(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newTokenEnv(t, tenant.NewTokens(bytes.Repeat([]byte("x"), 32), tenant.WithTokenTTL(time.Hour), tenant.WithTokenClock(clock)))
	base := e.serve(tokKeyA)
	id := e.create(base, tokKeyA)
	exec, hdr := e.endpoint(base, tokKeyA, id)

	mu.Lock()
	now = now.Add(time.Hour - time.Second)
	mu.Unlock()
	if code, _, body := e.do("GET", exec+"/ping", hdr, ""); code != http.StatusOK {
		t.Fatalf("ping a second before the token's expiry: %d %s", code, body)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	code, rh, body := e.do("POST", exec+"/command", hdr, `{"command": "echo late"}`)
	e.wantRefused("a token at its expiry", code, rh, body, "TOKEN_EXPIRED", "expired")

	exec, hdr = e.endpoint(base, tokKeyA, id)
	if code, _, body := e.do("POST", exec+"/command", hdr, `{"command": "echo renewed"}`); code != http.StatusOK || !strings.Contains(body, "renewed") {
		t.Errorf("the endpoint's new token: %d %s", code, body)
	}
}
