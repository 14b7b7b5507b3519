package execd

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// TestAccess: every request needs the token of its own sandbox; an unknown
// or stopped sandbox is 404 and is never created by the request.
func TestAccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := e.sandbox("sbx-b")
	other := tenant.NewKeys([]string{"another-api-key"})
	otherTenant, err := other.Lookup("another-api-key")
	if err != nil {
		t.Fatal(err)
	}
	stopped := e.sandbox("sbx-stopped")
	stoppedToken := e.tokenOf(tenant.Local, stopped)
	cid := containerOf(t, e.m, tenant.Local, e.id)
	if err := e.m.Stop(context.Background(), tenant.Local.SessionKey(stopped)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		id     string
		token  string
		status int
		code   string
	}{
		{"no token", e.id, "", http.StatusUnauthorized, codeUnauthorized},
		{"garbage token", e.id, "garbage", http.StatusForbidden, codeForbidden},
		{"forged token", e.id, "local.AAAA", http.StatusForbidden, codeForbidden},
		{"token of A on B", b, e.token, http.StatusForbidden, codeForbidden},
		{"token of another secret", e.id, tenant.NewTokens([]byte("other-secret-0123456789abcdefghij")).Issue(tenant.Local, e.id, cid), http.StatusForbidden, codeForbidden},
		// A keyless server serves only the local tenant: a key's token is
		// refused before any lookup (TestOtherTenant has it with keys).
		{"a key tenant's token on a keyless server", e.id, e.tokens.Issue(otherTenant, e.id, cid), http.StatusUnauthorized, codeKeyRevoked},
		{"unknown sandbox", "nope", e.tokenOf(tenant.Local, "nope"), http.StatusNotFound, codeSandboxNotFound},
		{"stopped sandbox", stopped, stoppedToken, http.StatusNotFound, codeSandboxNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, route := range []struct{ method, path string }{
				{"GET", "/ping"}, {"POST", "/command"}, {"GET", "/files/info?path=/session"}, {"POST", "/code"},
			} {
				resp := e.reqAs(tt.id, tt.token, route.method, route.path, strings.NewReader(`{"command":"true","code":"1"}`), "X-Request-ID", "req-42")
				wantError(t, resp, tt.status, tt.code)
				if got := resp.Header.Get("X-Request-ID"); got != "req-42" {
					t.Errorf("X-Request-ID %q, want it echoed", got)
				}
			}
		})
	}
	// Neither the unknown id nor the other tenant's was created.
	for _, key := range []string{tenant.Local.SessionKey("nope"), otherTenant.SessionKey(e.id)} {
		if _, err := e.m.Info(context.Background(), key); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Info(%q) = %v, want ErrNotFound: a refused request created a session", key, err)
		}
	}
	if info, _ := e.m.Info(context.Background(), tenant.Local.SessionKey(stopped)); info.State != session.StateStopped {
		t.Errorf("stopped sandbox is %q after the requests", info.State)
	}

	// The right token works, on every sandbox, with a request id when
	// none came.
	resp := e.req("GET", "/ping", nil)
	wantStatus(t, resp, http.StatusOK)
	if resp.Header.Get("X-Request-ID") == "" {
		t.Errorf("no X-Request-ID made up")
	}
	wantStatus(t, e.reqAs(b, e.tokenOf(tenant.Local, b), "GET", "/ping", nil), http.StatusOK)
}

// TestRoutingErrors: unknown routes and methods answer in OpenSandbox's
// shape.
func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	wantError(t, e.req("GET", "/nope", nil), http.StatusNotFound, codeNotFound)
	resp := e.req("PUT", "/command", nil)
	wantError(t, resp, http.StatusMethodNotAllowed, codeMethod)
	wantError(t, e.req("POST", "/files/permissions", strings.NewReader(`{}`)), http.StatusNotImplemented, codeNotSupported)
	wantError(t, e.req("POST", "/session/x/run", strings.NewReader(`{}`)), http.StatusNotImplemented, codeNotSupported)
	resp, err := http.Get(e.srv.URL + "/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	wantError(t, resp, http.StatusNotFound, codeNotFound)
}

// TestPausedSandbox: a paused sandbox answers 409, never resumed behind
// the back of whoever paused it; metrics still answer.
func TestPausedSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	if err := e.m.Pause(context.Background(), tenant.Local.SessionKey(e.id)); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.req("GET", "/ping", nil), http.StatusConflict, codeSandboxPaused)
	wantError(t, e.req("GET", "/files/info?path=/session", nil), http.StatusConflict, codeSandboxPaused)
	wantStatus(t, e.req("GET", "/metrics", nil), http.StatusOK)
	if info, _ := e.m.Info(context.Background(), tenant.Local.SessionKey(e.id)); info.State != session.StatePaused {
		t.Errorf("state %q after requests, want paused", info.State)
	}
}
