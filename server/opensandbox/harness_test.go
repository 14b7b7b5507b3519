package opensandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/server/opensandbox"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// Two tenants' API keys, for the servers that ask for keys.
const (
	keyA = "tenant-a-key-0123456789abcdef"
	keyB = "tenant-b-key-0123456789abcdef"
)

// env is one server under test: a real Manager on the engine in a
// namespace of its own, and the handler over it.
type env struct {
	t      *testing.T
	m      *session.Manager
	cfg    config.Config
	srv    *httptest.Server
	tokens tenant.Tokens
	keys   *tenant.Keys
	key    string // the API key requests carry by default ("" for none)
}

// newEnv starts a Manager (edit changes its config) and a server over it;
// with keys, requests need one (keyA by default).
func newEnv(t *testing.T, withKeys bool, edit func(*config.Config)) *env {
	t.Helper()
	cli := dockertest.Engine(t)
	cfg := config.Default()
	dir := t.TempDir()
	cfg.SandboxImage = dockertest.Image(t)
	cfg.Runtime = dockertest.Runtime(t)
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.InterruptGrace = 2 * time.Second
	cfg.TmpfsSizeMB = 64
	cfg.MemoryMB = 256
	if edit != nil {
		edit(&cfg)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "t-" + hex.EncodeToString(b[:])
	m, err := session.NewManager(context.Background(), cfg,
		session.WithNamespace(ns),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	e := &env{t: t, m: m, cfg: cfg}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	e.tokens = tenant.NewTokens(secret)
	if withKeys {
		e.keys = tenant.NewKeys([]string{keyA, keyB})
		e.key = keyA
	}
	// The server's log is shown when the test fails: a 500 says only
	// that the log has the cause.
	logs := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	e.srv = httptest.NewServer(opensandbox.NewHandler(m, opensandbox.Options{
		Keys: e.keys, Tokens: e.tokens, Config: cfg, MaxBodyBytes: 64 << 10,
		Log: slog.New(slog.NewTextHandler(logs, nil)),
	}))
	t.Cleanup(func() {
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
		if err := dockertest.Sweep(ctx, cli, session.LabelNamespace+"="+ns); err != nil {
			t.Errorf("sweep: %v", err)
		}
	})
	return e
}

// response is one answer, its body read.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// apiError is the error body every failure must have.
func (r response) apiError(t *testing.T) (code, message string) {
	t.Helper()
	var e map[string]any
	r.json(t, &e)
	c, ok1 := e["code"].(string)
	m, ok2 := e["message"].(string)
	if !ok1 || !ok2 || c == "" || m == "" || len(e) != 2 {
		t.Fatalf("error body %s: want exactly {code, message}", r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type %q, want application/json", ct)
	}
	return c, m
}

// do sends a request with the env's API key (header overrides: a nil value
// removes one).
func (e *env) do(method, path string, body any, header map[string]*string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.key != "" {
		req.Header.Set(opensandbox.APIKeyHeader, e.key)
	}
	for k, v := range header {
		if v == nil {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, *v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.Header.Get(opensandbox.RequestIDHeader) == "" {
		e.t.Errorf("%s %s: no %s in the answer", method, path, opensandbox.RequestIDHeader)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// sandbox is the part of OpenSandbox's Sandbox the tests read.
type sandbox struct {
	ID    string `json:"id"`
	Image *struct {
		URI string `json:"uri"`
	} `json:"image"`
	Status struct {
		State   string `json:"state"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"status"`
	Metadata   map[string]string `json:"metadata"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  *time.Time        `json:"expiresAt"`
	CreatedAt  time.Time         `json:"createdAt"`
}

// create makes a sandbox, requiring the 202.
func (e *env) create(body map[string]any) sandbox {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if _, ok := body["image"]; !ok {
		// The SDK always sends one (the spec requires it).
		body["image"] = map[string]any{"uri": "python:3.11"}
	}
	r := e.do("POST", "/v1/sandboxes", body, nil)
	if r.status != http.StatusAccepted {
		e.t.Fatalf("create: status %d %s, want exactly 202", r.status, r.body)
	}
	var sb sandbox
	r.json(e.t, &sb)
	if sb.ID == "" {
		e.t.Fatalf("create: no id in %s", r.body)
	}
	if loc := r.header.Get("Location"); loc != "/v1/sandboxes/"+sb.ID {
		e.t.Errorf("create: Location %q", loc)
	}
	return sb
}

func (e *env) get(id string) sandbox {
	e.t.Helper()
	r := e.do("GET", "/v1/sandboxes/"+id, nil, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("get %s: status %d %s", id, r.status, r.body)
	}
	var sb sandbox
	r.json(e.t, &sb)
	return sb
}

// exec runs code in a sandbox through the Manager, as execd would.
func (e *env) exec(id, code string) (*session.Result, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t := tenant.Local
	if e.keys != nil {
		var err error
		if t, err = e.keys.Lookup(e.key); err != nil {
			e.t.Fatal(err)
		}
	}
	return e.m.Exec(ctx, t.SessionKey(id), code)
}

func ptr(s string) *string { return &s }

// lockedBuffer is a bytes.Buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
