package opensandbox_test

import (
	"context"
	"crypto/rand"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/opensandbox"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// newFakeEnv is newEnv over drv, an in-memory driver (or a wrapper of
// one): no engine, for what only the translation decides. Requests carry
// keyA.
func newFakeEnv(t *testing.T, drv session.Driver) *env {
	t.Helper()
	return newFakeEnvConfig(t, drv, nil)
}

// newFakeEnvConfig is newFakeEnv with the configuration edited.
func newFakeEnvConfig(t *testing.T, drv session.Driver, edit func(*config.Config)) *env {
	t.Helper()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	if edit != nil {
		edit(&cfg)
	}
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(drv))
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	e := &env{t: t, m: m, cfg: cfg, keys: tenant.NewKeys([]string{keyA, keyB}), key: keyA}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	e.tokens = tenant.NewTokens(secret)
	e.srv = httptest.NewServer(opensandbox.NewHandler(m, opensandbox.Options{
		Keys: e.keys, Tokens: e.tokens, Config: cfg, MaxBodyBytes: 64 << 10,
	}))
	t.Cleanup(func() {
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
	})
	return e
}

// sessionKey is the Manager's key of sandbox id for the env's API key.
func (e *env) sessionKey(id string) string {
	e.t.Helper()
	t := tenant.Local
	if e.keys != nil {
		var err error
		if t, err = e.keys.Lookup(e.key); err != nil {
			e.t.Fatal(err)
		}
	}
	return t.SessionKey(id)
}

// countingDriver counts the per-container calls the Manager makes.
type countingDriver struct {
	*sessiontest.Driver
	inspects, memory atomic.Int64
}

func (d *countingDriver) Inspect(ctx context.Context, id string) (session.Container, error) {
	d.inspects.Add(1)
	return d.Driver.Inspect(ctx, id)
}

func (d *countingDriver) MemoryUsage(ctx context.Context, id string) (int64, error) {
	d.memory.Add(1)
	return d.Driver.MemoryUsage(ctx, id)
}
