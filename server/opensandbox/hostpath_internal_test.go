package opensandbox

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/session"
)

// TestFullServerDiskNamed: a create or lifecycle call that fails because
// the server's own disk is full answers 507 saying so, without the host
// path the cause holds (the log has it).
func TestFullServerDiskNamed(t *testing.T) {
	h := &handler{log: slog.New(slog.DiscardHandler)}
	err := fmt.Errorf("session %q: start: %w", "k", fmt.Errorf("the server's database: %w: database or disk is full in /srv/secret-host/artifacts.db", session.ErrStorageFull))
	w := httptest.NewRecorder()
	h.fail(w, httptest.NewRequest("POST", "/v1/sandboxes", nil), "abc", err)
	body := w.Body.String()
	if w.Code != http.StatusInsufficientStorage || !strings.Contains(body, "the server's disk is full") || strings.Contains(body, "/srv/secret-host") {
		t.Errorf("answer %d %s, want 507 saying the server's disk is full, without the path", w.Code, body)
	}
}
