package execd

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// containerOf is the container id of t's sandbox id: the nonce its tokens
// are issued for.
func containerOf(t *testing.T, m *session.Manager, tn tenant.Tenant, id string) string {
	t.Helper()
	info, err := m.Info(context.Background(), tn.SessionKey(id), session.WithoutMemoryUse())
	if err != nil {
		t.Fatalf("info of sandbox %s: %v", id, err)
	}
	return info.ContainerID
}

// TestTokensWithKeys: on a server with keys, another key's genuine token
// for the same sandbox name finds nothing (and creates nothing), and the
// tokens a keyless run of the server issued to the local tenant open
// nothing once it has keys.
func TestTokensWithKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	keys := tenant.NewKeys([]string{"key-a-0123456789abcdef", "key-b-0123456789abcdef"})
	a, _ := keys.Lookup("key-a-0123456789abcdef")
	b, _ := keys.Lookup("key-b-0123456789abcdef")
	srv := httptest.NewServer(newHandler(e.m, Options{Tokens: e.tokens, Keys: keys}))
	t.Cleanup(srv.Close)
	withKeys := &env{t: t, m: e.m, srv: srv, tokens: e.tokens}

	idA := "sbx-of-a"
	if _, err := e.m.Start(context.Background(), a.SessionKey(idA)); err != nil {
		t.Fatal(err)
	}
	cid := containerOf(t, e.m, a, idA)
	wantStatus(t, withKeys.reqAs(idA, e.tokens.Issue(a, idA, cid), "GET", "/ping", nil), http.StatusOK)
	// B's token names A's container: still B's own (absent) sandbox.
	wantError(t, withKeys.reqAs(idA, e.tokens.Issue(b, idA, cid), "GET", "/ping", nil), http.StatusNotFound, codeSandboxNotFound)
	if _, err := e.m.Info(context.Background(), b.SessionKey(idA)); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Info of B's %s = %v, want ErrNotFound: a refused request created a session", idA, err)
	}

	resp := withKeys.reqAs(e.id, e.token, "GET", "/ping", nil)
	wantError(t, resp, http.StatusUnauthorized, codeKeyRevoked)
	if !resp.Close {
		t.Errorf("a refused token's connection is kept alive")
	}
	wantStatus(t, e.req("GET", "/ping", nil), http.StatusOK) // the keyless server still takes it
}
