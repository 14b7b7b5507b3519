package opensandbox_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/opensandbox"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestIdlePauseExtension (issue 24, idle sessions that pause): the create
// extension agentbox.idleAction=pause makes the idle timeout pause the
// sandbox: get says Paused with reason "idle", and its next call resumes
// it with its state. A bad value is a 400 naming the extension.
func TestIdlePauseExtension(t *testing.T) {
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.IdleTimeout = time.Second // IDLE_ACTION stays stop: the extension decides
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(sessiontest.NewDriver()),
		session.WithSweepInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, m: m, cfg: cfg, keys: tenant.NewKeys([]string{keyA, keyB}), key: keyA}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	e.tokens = tenant.NewTokens(secret)
	e.srv = httptest.NewServer(opensandbox.NewHandler(m, opensandbox.Options{Keys: e.keys, Tokens: e.tokens, Config: cfg}))
	t.Cleanup(func() {
		e.srv.Close()
		m.Close(context.Background())
	})

	r := e.do("POST", "/v1/sandboxes", map[string]any{"image": map[string]any{"uri": "python:3.11"},
		"extensions": map[string]string{opensandbox.ExtensionIdleAction: "freeze"}}, nil)
	if code, msg := r.apiError(t); r.status != http.StatusBadRequest || !strings.Contains(msg, opensandbox.ExtensionIdleAction) {
		t.Errorf("a bad idle action: %d %s %s, want 400 naming the extension", r.status, code, msg)
	}
	sb := e.create(map[string]any{"image": map[string]any{"uri": "python:3.11"},
		"extensions": map[string]string{opensandbox.ExtensionIdleAction: "pause"}})
	if _, err := e.exec(sb.ID, "x = 41"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for got := e.get(sb.ID); got.Status.State != opensandbox.StatePaused || got.Status.Reason != "idle"; got = e.get(sb.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("never paused by its idle timeout: %+v", got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, err := e.exec(sb.ID, "x + 1")
	if err != nil || res.StateLost || len(res.Outputs) == 0 || res.Outputs[len(res.Outputs)-1].Data["text/plain"] != "42" {
		t.Fatalf("the call after the idle pause: %v, %+v", err, res)
	}
	if got := e.get(sb.ID); got.Status.State != opensandbox.StateRunning {
		t.Errorf("after the call: %+v, want Running", got.Status)
	}
}
