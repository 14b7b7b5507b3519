package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/server/opensandbox"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

func testConfig(t testing.TB) config.Config {
	cfg := config.Default()
	dir := t.TempDir()
	cfg.SandboxImage = dockertest.Image(t)
	cfg.Runtime = dockertest.Runtime(t)
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.TmpfsSizeMB = 64
	cfg.MemoryMB = 256
	cfg.FilesMaxCallMB = 1 // bodies above 2 MiB are refused
	return cfg
}

func namespace() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "t-" + hex.EncodeToString(b[:])
}

// manager starts a Manager in ns; Run closes it, the cleanup removes the
// namespace's containers.
func manager(t testing.TB, cfg config.Config, ns string) *session.Manager {
	t.Helper()
	cli := dockertest.Engine(t)
	m, err := session.NewManager(context.Background(), cfg, session.WithNamespace(ns),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = m.Close(ctx) // closed already by Run, mostly
		if err := dockertest.Sweep(ctx, cli, session.LabelNamespace+"="+ns); err != nil {
			t.Errorf("sweep: %v", err)
		}
	})
	return m
}

// TestRefusesOpenWithoutKeys: no API key and an address beyond loopback is
// no start; loopback, or a key, is. No key and no host (the default :8080)
// listens on loopback.
func TestRefusesOpenWithoutKeys(t *testing.T) {
	cfg := testConfig(t)
	for _, tt := range []struct {
		name string
		addr string
		keys *tenant.Keys
		ok   bool
	}{
		{"all interfaces, no key", "0.0.0.0:0", nil, false},
		{"all interfaces, empty keys", "0.0.0.0:0", tenant.NewKeys(nil), false},
		{"loopback, no key", "127.0.0.1:0", nil, true},
		{"all interfaces, a key", "0.0.0.0:0", tenant.NewKeys([]string{"a-key-0123456789abcdef"}), true},
		{"no host, no key", ":0", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := manager(t, cfg, namespace())
			c := cfg
			c.ServeAddr = tt.addr
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ready := make(chan net.Addr, 1)
			done := make(chan error, 1)
			go func() {
				done <- server.Run(ctx, c, m, server.Mounts{}, server.Options{Keys: tt.keys, Ready: func(a net.Addr) { ready <- a }})
			}()
			select {
			case err := <-done:
				if tt.ok || !errors.Is(err, server.ErrOpenWithoutKeys) {
					t.Fatalf("Run: %v, want ok=%v (ErrOpenWithoutKeys when refused)", err, tt.ok)
				}
				if _, err := m.List(context.Background()); !errors.Is(err, session.ErrClosed) {
					t.Errorf("after a refused start the manager is not closed: %v", err)
				}
			case addr := <-ready:
				if !tt.ok {
					t.Fatalf("Run started on %s, want it refused", addr)
				}
				port := addr.(*net.TCPAddr).Port
				if tt.keys.Len() == 0 && !addr.(*net.TCPAddr).IP.IsLoopback() {
					t.Errorf("listening on %s with no key, want loopback only", addr)
				}
				resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/healthz")
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("healthz: %v %v", err, resp)
				}
				resp.Body.Close()
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run after cancel: %v", err)
				}
			}
		})
	}
}

// TestServeAndRestart: the mounts answer on their paths (absent ones 404),
// bodies are capped, and a shutdown keeps sessions running: a server started
// again on the same namespace serves the sandbox, its Python state intact.
func TestServeAndRestart(t *testing.T) {
	cfg := testConfig(t)
	ns := namespace()
	secret := bytes.Repeat([]byte("s"), 32)
	tokens := tenant.NewTokens(secret)
	keys := tenant.NewKeys([]string{"a-key-0123456789abcdef"})

	start := func() (base string, stop func()) {
		m := manager(t, cfg, ns)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h := opensandbox.NewHandler(m, opensandbox.Options{Keys: keys, Tokens: tokens, Config: cfg})
		execd := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "execd "+r.URL.Path) })
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- server.Run(ctx, cfg, m, server.Mounts{OpenSandbox: h, Execd: execd}, server.Options{Keys: keys, Listener: ln})
		}()
		return "http://" + ln.Addr().String(), func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	do := func(method, url string, body io.Reader) (int, string) {
		req, _ := http.NewRequest(method, url, body)
		req.Header.Set(opensandbox.APIKeyHeader, "a-key-0123456789abcdef")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}

	base, stop := start()
	code, body := do("POST", base+"/v1/sandboxes", strings.NewReader(`{"image": {"uri": "python:3.11"}, "timeout": null}`))
	if code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, body)
	}
	var sb struct{ ID string }
	_ = json.Unmarshal([]byte(body), &sb)
	if code, body := do("GET", base+"/execd/"+sb.ID+"/ping", nil); code != 200 || body != "execd /execd/"+sb.ID+"/ping" {
		t.Errorf("execd mount: %d %q", code, body)
	}
	for _, p := range []string{"/mcp", "/v1/agentbox/sessions", "/artifacts/x", "/nothing"} {
		if code, body := do("GET", base+p, nil); code != 404 || !strings.Contains(body, `"code"`) {
			t.Errorf("GET %s with nothing mounted: %d %s, want a JSON 404", p, code, body)
		}
	}
	big := bytes.Repeat([]byte("x"), 3<<20)
	if code, _ := do("POST", base+"/execd/"+sb.ID+"/files/upload", bytes.NewReader(big)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 3 MiB body with FILES_MAX_CALL_MB=1: %d, want 413", code)
	}

	// Python state set through the Manager the way execd would.
	m2 := manager(t, cfg, ns)
	tn, _ := keys.Lookup("a-key-0123456789abcdef")
	ctx := context.Background()
	if _, err := m2.Exec(ctx, tn.SessionKey(sb.ID), "kept = 'yes'"); err != nil {
		t.Fatal(err)
	}
	if err := m2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	stop()

	base, stop = start()
	defer stop()
	code, body = do("GET", base+"/v1/sandboxes/"+sb.ID, nil)
	if code != 200 || !strings.Contains(body, `"Running"`) {
		t.Fatalf("after a restart, get: %d %s, want it Running", code, body)
	}
	m3 := manager(t, cfg, ns)
	res, err := m3.Exec(ctx, tn.SessionKey(sb.ID), "print(kept)")
	if err != nil || strings.TrimSpace(res.Stdout) != "yes" || res.StateLost {
		t.Errorf("after a restart, kept: %v %+v", err, res)
	}
	_ = m3.Close(ctx)
}

// TestTokens: the execd token secret is made once, owner-only, and read
// again by the next start, so tokens survive restarts.
func TestTokens(t *testing.T) {
	cfg := config.Default()
	cfg.ArtifactsDB = filepath.Join(t.TempDir(), "db", "artifacts.db")
	a, err := server.Tokens(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := server.Tokens(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok := a.Issue(tenant.Local, "sb1", "container-1")
	if _, err := b.Verify(tok, "sb1"); err != nil {
		t.Errorf("a token from the first start does not verify after the second: %v", err)
	}
	if a.TTL() != cfg.SandboxTokenTTL {
		t.Errorf("token TTL %v, want SANDBOX_TOKEN_TTL_S's %v", a.TTL(), cfg.SandboxTokenTTL)
	}
	cfg.SandboxTokenTTL = time.Hour
	if c, _ := server.Tokens(cfg); c.TTL() != time.Hour {
		t.Errorf("token TTL %v with SANDBOX_TOKEN_TTL_S=3600", c.TTL())
	}
	info, err := os.Stat(server.TokenSecretFile(cfg))
	if err != nil || info.Mode().Perm()&0o077 != 0 {
		t.Errorf("secret file: %v %v, want owner-only", err, info)
	}
}
