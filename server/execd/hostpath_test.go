package execd

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/session"
)

// hostPath stands for a path of the server's own files (ARTIFACTS_DB and
// the like): no answer may show it.
const hostPath = "/srv/secret-host/agentbox/artifacts.db"

// TestErrorsHideHostPaths: a failure of the server's own storage answers
// what failed (a full disk: 507 and "the server's disk is full"), and no
// other server-side failure echoes its cause, which may hold host paths;
// the handler logs the cause for the operator. Before, every 500 carried
// the error's text ("disk full at /path/to/artifacts.db: ...").
func TestErrorsHideHostPaths(t *testing.T) {
	full := fmt.Errorf("session %q: exec: record that execution x starts (it did not run): %w",
		"k", fmt.Errorf("the server's database: %w: database or disk is full in %s", session.ErrStorageFull, hostPath))
	other := fmt.Errorf("session %q: exec: %w", "k", &fs.PathError{Op: "open", Path: hostPath, Err: syscall.EROFS})
	unavailable := fmt.Errorf("%w: no Docker engine answers at unix:///srv/secret-host/docker.sock", session.ErrUnavailable)
	for _, tt := range []struct {
		err    error
		status int
		say    string
	}{
		{full, http.StatusInsufficientStorage, "the server's disk is full"},
		{other, http.StatusInternalServerError, "the server log has the cause"},
		{unavailable, http.StatusServiceUnavailable, "unavailable"},
	} {
		e := fromErr(tt.err)
		body, _ := json.Marshal(e)
		if e.Status != tt.status || !strings.Contains(e.Message, tt.say) {
			t.Errorf("%v: %d %s, want %d saying %q", tt.err, e.Status, body, tt.status, tt.say)
		}
		if strings.Contains(string(body), "/srv/secret-host") {
			t.Errorf("%v: the answer %s shows a host path", tt.err, body)
		}
	}
}

// TestExpiredSandboxSaysSo: code or a command cut by the sandbox's time
// to live answers (or ends its stream with) "sandbox expired" and the
// Manager's words, which say when; before, "sandbox not found".
func TestExpiredSandboxSaysSo(t *testing.T) {
	err := fmt.Errorf("session %q: exec: %w", "k", fmt.Errorf("%w: its time to live ended at 2026-11-26T04:00:00Z; container abc removed", session.ErrExpired))
	e := fromErr(err)
	if e.Status != http.StatusNotFound || !strings.HasPrefix(e.Message, "sandbox expired: ") || !strings.Contains(e.Message, "time to live ended at 2026-11-26T04:00:00Z") {
		t.Errorf("%v: %d %q, want 404 saying the sandbox expired, and when", err, e.Status, e.Message)
	}
}
