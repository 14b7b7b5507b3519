package tools_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/tools"
)

// engineManager is a Manager on the real engine, in a namespace of its own,
// its files under a temporary folder; its containers go when the test ends.
func engineManager(t *testing.T) *session.Manager {
	t.Helper()
	cli := dockertest.Engine(t)
	cfg := config.Default()
	dir := t.TempDir()
	cfg.SandboxImage = dockertest.Image(t)
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.InterruptGrace = 2 * time.Second
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "t-" + hex.EncodeToString(b[:])
	m, err := session.NewManager(context.Background(), cfg, session.WithNamespace(ns),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
		if err := dockertest.Sweep(ctx, cli, session.LabelNamespace+"="+ns); err != nil {
			t.Errorf("sweep: %v", err)
		}
	})
	return m
}

// TestCodeSandboxOnTheEngine: timeout_s is seconds and a retried tool call
// replays, in a real sandbox.
func TestCodeSandboxOnTheEngine(t *testing.T) {
	t.Parallel()
	tl := find(t, tools.New(engineManager(t), tools.Options{}), "code_sandbox")
	t.Run("timeout_s is seconds", func(t *testing.T) {
		checkTimeoutSeconds(t, tl, func(s string) string { return "import time\ntime.sleep(" + s + ")" })
	})
	t.Run("a retried call replays", func(t *testing.T) {
		checkCallIDReplays(t, tl, "n += 1\nprint(n)", "print(n)")
	})
}
