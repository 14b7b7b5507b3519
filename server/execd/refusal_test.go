package execd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/server/tenant"
)

// TestRefusedWriteSaysWhy: a write the sandbox refuses answers 403 with
// the reason in the body the SDK reads ({"code", "message"} at the top
// level: its exception's error.code and error.message), naming the path
// and the sandbox by its id, not by the server's session key.
func TestRefusedWriteSaysWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	resp := e.upload(t, []upFile{{meta: `{"path":"/usr/agentbox-refused.py","owner":null,"group":null,"mode":755}`, data: "print(1)\n"}})
	body := wantStatus(t, resp, http.StatusForbidden)
	var sdk map[string]any
	if err := json.Unmarshal([]byte(body), &sdk); err != nil {
		t.Fatalf("body %q is not JSON: %v", body, err)
	}
	code, _ := sdk["code"].(string)
	msg, _ := sdk["message"].(string)
	if code != codePermission || len(sdk) != 2 {
		t.Fatalf("body %s: want exactly {code: %s, message}", body, codePermission)
	}
	if !strings.Contains(msg, "/usr/agentbox-refused.py") || !strings.Contains(msg, e.id) {
		t.Errorf("message %q: want the path and the sandbox id", msg)
	}
	if !strings.Contains(msg, "read-only") && !strings.Contains(msg, "permission denied") {
		t.Errorf("message %q does not say why the write was refused", msg)
	}
	checkPublic(t, tenant.Local.SessionKey(e.id), msg)
}
