package mcpserver

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/session"
)

// TestSystemMessageHidesHostPaths: what a model (and the tenant behind it)
// is told of a failure of the server's own storage names it (a full disk)
// without a host path, and an unclassified failure does not echo its
// cause (the handler logs it). Before, the error's text was the message.
func TestSystemMessageHidesHostPaths(t *testing.T) {
	const hostPath = "/srv/secret-host/agentbox/artifacts.db"
	full := fmt.Errorf("session %q: exec: %w", "k", fmt.Errorf("the server's database: %w: database or disk is full in %s", session.ErrStorageFull, hostPath))
	other := fmt.Errorf("session %q: exec: %w", "k", &fs.PathError{Op: "open", Path: hostPath, Err: syscall.EROFS})
	unavailable := fmt.Errorf("%w: no Docker engine answers at unix:///srv/secret-host/docker.sock", session.ErrUnavailable)
	for _, tt := range []struct {
		err error
		say string
	}{
		{full, "the server's disk is full"},
		{other, "the server's log has the cause"},
		{unavailable, "unreachable"},
	} {
		msg := systemMessage(context.Background(), tt.err)
		if !strings.Contains(msg, tt.say) || strings.Contains(msg, "/srv/secret-host") {
			t.Errorf("%v: message %q, want it to say %q and show no host path", tt.err, msg, tt.say)
		}
	}
}
