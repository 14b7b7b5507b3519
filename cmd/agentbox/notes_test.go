package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLangGraphNotesPrinted: a LangGraph-Sandbox setting agentbox does not
// need is named on stderr, not silently ignored (issue 24 row 7), before
// the command goes on (here to an unreachable engine: no engine needed).
func TestLangGraphNotesPrinted(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	t.Setenv("ARTIFACTS_DB", filepath.Join(dir, "artifacts.db"))
	t.Setenv("COMPOSE_NETWORK", "langgraph-network")
	r := agentbox(t, "", "ls")
	if r.code != exitSandbox {
		t.Errorf("exit %d, want %d; stderr %q", r.code, exitSandbox, r.stderr)
	}
	if !strings.Contains(r.stderr, "agentbox: note: COMPOSE_NETWORK=langgraph-network") || !strings.Contains(r.stderr, "SANDBOX_NETWORK") {
		t.Errorf("stderr %q does not name COMPOSE_NETWORK and what to set instead", r.stderr)
	}
}
