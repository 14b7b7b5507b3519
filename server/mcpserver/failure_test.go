package mcpserver_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/mcpserver"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestSystemFailure: when the system fails (here, a closed manager), every
// tool answers with a tool error saying so, never a protocol error, and
// the failure is logged for the operator.
func TestSystemFailure(t *testing.T) {
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(sessiontest.NewDriver()))
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	var logs bytes.Buffer
	cs := memoryClient(t, m, mcpserver.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	want(t, cs, "run_python", args("code", "x = 1", "session", "s"), false)
	if err := m.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, tc := range []struct{ tool, args string }{
		{"run_python", args("code", "print(x)", "session", "s")},
		{"run_shell", args("command", "true", "session", "s")},
		{"write_file", args("path", "a", "content", "b", "session", "s")},
		{"list_artifacts", args("session", "s")},
		{"list_datasets", args("session", "s")},
		{"session_info", args("session", "s")},
		{"reset_session", args("session", "s")},
	} {
		want(t, cs, tc.tool, tc.args, true, "agentbox failed", "server is shutting down")
	}
	if !strings.Contains(logs.String(), "mcp tool call failed") || !strings.Contains(logs.String(), "session_key=local/s") {
		t.Errorf("the failures were not logged with their session key:\n%s", logs.String())
	}
}
