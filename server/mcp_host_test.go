package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestMCPBehindItsHostName: the guard decides which Host names a server
// answers (any, with keys; loopback and SERVE_ALLOWED_HOSTS without), the
// same for every API. MCP must not refuse a name the guard let in: a
// server on 127.0.0.1 behind a reverse proxy on the same host, which
// forwards the public name, serves the other APIs and must serve MCP.
func TestMCPBehindItsHostName(t *testing.T) {
	for _, mode := range []struct {
		name string
		keys *tenant.Keys
		host string
	}{
		{"with keys, a public name", tenant.NewKeys([]string{guardKey}), "agentbox.example.com"},
		{"keyless, SERVE_ALLOWED_HOSTS", nil, "agentbox.internal:8080"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.ServeAllowedHosts = []string{"agentbox.internal"}
			dir := t.TempDir()
			cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
			cfg.SessionsRoot = filepath.Join(dir, "sessions")
			cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
			m, err := session.NewManager(context.Background(), cfg, session.WithDriver(sessiontest.NewDriver()))
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			mounts := server.APIs(m, cfg, mode.keys, tenant.NewTokens([]byte(strings.Repeat("k", 32))), nil, nil)
			go func() { done <- server.Run(ctx, cfg, m, mounts, server.Options{Keys: mode.keys, Listener: ln}) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
			req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/mcp", strings.NewReader(body))
			req.Host = mode.host
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if mode.keys != nil {
				req.Header.Set("Authorization", "Bearer "+guardKey)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), "serverInfo") {
				t.Fatalf("MCP initialize with Host %s: %d %s", mode.host, resp.StatusCode, out)
			}
			if mode.keys != nil {
				return
			}
			// The guard still refuses a rebound name on a keyless server.
			req, _ = http.NewRequest("POST", "http://"+ln.Addr().String()+"/mcp", strings.NewReader(body))
			req.Host = "rebind.evil.example:8080"
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(out), "HOST_NOT_ALLOWED") {
				t.Fatalf("MCP with a rebound name on a keyless server: %d %s", resp.StatusCode, out)
			}
		})
	}
}
