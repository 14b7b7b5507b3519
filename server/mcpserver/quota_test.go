package mcpserver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/server/mcpserver"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// quotaManager is a Manager on the engine with the tenant quotas agentbox
// serve applies (per API key), edit setting them.
func quotaManager(t *testing.T, edit func(*config.Config)) *session.Manager {
	t.Helper()
	cli := dockertest.Engine(t)
	cfg := config.Default()
	dir := t.TempDir()
	cfg.SandboxImage = dockertest.Image(t)
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.InterruptGrace = 2 * time.Second
	cfg.TmpfsSizeMB, cfg.MemoryMB = 64, 256
	cfg.TenantMaxSandboxes, cfg.TenantMaxMemoryMB, cfg.TenantMaxInflight, cfg.TenantMaxArtifactMB = 0, 0, 0, 0
	edit(&cfg)
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "t-" + hex.EncodeToString(b[:])
	m, err := session.NewManager(context.Background(), cfg, session.WithNamespace(ns), session.WithQuotaGroup(tenant.Group),
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

// TestQuotaOverMCP: MCP creates sessions implicitly, on a tool call naming
// a new one; a tenant at TENANT_MAX_SANDBOXES gets a tool error naming the
// limit, and another tenant is not held back.
func TestQuotaOverMCP(t *testing.T) {
	m := quotaManager(t, func(c *config.Config) { c.TenantMaxSandboxes = 1 })
	srv := httpServer(t, m, mcpserver.Options{Keys: tenant.NewKeys([]string{"key-a", "key-b"})})
	a := httpClient(t, srv, "key-a", nil)
	want(t, a, "run_python", args("code", "print('one')", "session", "one"), false, "one")
	want(t, a, "run_python", args("code", "print('two')", "session", "two"), true, "TENANT_MAX_SANDBOXES")
	want(t, a, "run_python", args("code", "print('still')", "session", "one"), false, "still")
	b := httpClient(t, srv, "key-b", nil)
	want(t, b, "run_python", args("code", "print('b')", "session", "one"), false, "b")
}

// TestMCPCallWhoseClientLeft: MCP has no way to fetch a result later, so a
// tool call whose client gives up is interrupted (or, still queued, never
// run): what the code would have done after never happens.
func TestMCPCallWhoseClientLeft(t *testing.T) {
	m := quotaManager(t, func(*config.Config) {})
	srv := httpServer(t, m, mcpserver.Options{})
	cs := httpClient(t, srv, "", nil)
	want(t, cs, "run_python", args("code", "print('ready')", "session", "s"), false, "ready")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var a any = json.RawMessage(args("code", "import time; time.sleep(30); open('/session/after', 'w').write('x')", "session", "s"))
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: a}); err == nil {
		t.Fatal("the call returned before its client gave up")
	}
	start := time.Now()
	want(t, cs, "run_python", args("code", "import os; print(os.path.exists('/session/after'))", "session", "s"), false, "False")
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the next call waited %s: the abandoned one ran on", d)
	}
}
