package execd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestIdlePausedSandboxResumes (issue 24, idle sessions that pause): a
// sandbox its idle timeout paused (IDLE_ACTION=pause) is not refused with
// 409 like one a user paused: ping answers, and the next call resumes it
// with its state.
func TestIdlePausedSandboxResumes(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.IdleTimeout, cfg.IdleAction = time.Second, config.IdlePause
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(sessiontest.NewDriver()),
		session.WithSweepInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Tokens: tenant.NewTokens(secret), PingInterval: 200 * time.Millisecond}
	h := newHandler(m, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		m.Close(context.Background())
	})
	e := &env{t: t, m: m, h: h, srv: srv, tokens: opts.Tokens}
	e.id = e.sandbox("sbx-idle")
	e.token = e.tokenOf(tenant.Local, e.id)
	key := tenant.Local.SessionKey(e.id)
	if _, err := m.Exec(context.Background(), key, "x = 41"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		in, err := m.Info(context.Background(), key, session.WithoutMemoryUse())
		if err == nil && in.State == session.StatePaused && in.PausedBy == session.PausedByIdle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never paused by its idle timeout: %+v (%v)", in, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantStatus(t, e.req("GET", "/ping", nil), http.StatusOK)
	body := wantStatus(t, e.req("POST", "/code", strings.NewReader(`{"code":"x + 1","context":{"language":"python"}}`), "Content-Type", "application/json"), http.StatusOK)
	if !strings.Contains(body, "42") {
		t.Errorf("code after the idle pause: %s, want 42", body)
	}
	if in, err := m.Info(context.Background(), key, session.WithoutMemoryUse()); err != nil || in.State != session.StateRunning {
		t.Errorf("after the call: %+v (%v), want running", in, err)
	}
}
