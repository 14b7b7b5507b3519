package session_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// TestForeignImageEngine: the engine's description of an image without
// agentbox's labels gets the "not an agentbox sandbox image" refusal
// (issue 24 row 11), as the fake driver's does in sessiontest.
func TestForeignImageEngine(t *testing.T) {
	ref := dockertest.ForeignImage(t, "agentbox-test-foreign")
	cfg := config.Default()
	dir := t.TempDir()
	cfg.SandboxImage = ref
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	m, err := session.NewManager(context.Background(), cfg, session.WithNamespace(namespace()))
	if err == nil {
		m.Close(context.Background())
		t.Fatalf("new manager with %s: no error", ref)
	}
	if !errors.Is(err, session.ErrNotSandboxImage) || !strings.Contains(err.Error(), "sandbox-setup") {
		t.Fatalf("new manager with %s: %v, want ErrNotSandboxImage saying to use sandbox-setup", ref, err)
	}
}
