package native

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

// TestErrorsHideHostPaths: a failure of the server's own storage answers
// what failed (a full disk: 507 and "the server's disk is full"), and no
// other server-side failure echoes its cause, which may hold host paths
// (the handler logs it). Before, every 500 carried the error's text.
func TestErrorsHideHostPaths(t *testing.T) {
	const hostPath = "/srv/secret-host/agentbox/artifacts.db"
	c := call{name: "mine", key: "tenant-x/mine"}
	full := fmt.Errorf("session %q: exec: %w", c.key, fmt.Errorf("the server's database: %w: database or disk is full in %s", session.ErrStorageFull, hostPath))
	other := fmt.Errorf("session %q: exec: %w", c.key, &fs.PathError{Op: "open", Path: hostPath, Err: syscall.EROFS})
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
		status, body := failure(c, tt.err)
		data, _ := json.Marshal(body)
		if status != tt.status || !strings.Contains(body.Message, tt.say) {
			t.Errorf("%v: %d %s, want %d saying %q", tt.err, status, data, tt.status, tt.say)
		}
		if strings.Contains(string(data), "/srv/secret-host") {
			t.Errorf("%v: the answer %s shows a host path", tt.err, data)
		}
	}
}
