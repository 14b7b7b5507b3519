package execd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// secret is the fixed token secret of the tests.
var secret = []byte("execd-test-secret-0123456789abcdef")

// env is a real Manager behind the handler on a test server, with one
// sandbox of the local tenant ready.
type env struct {
	t      *testing.T
	m      *session.Manager
	h      *Handler
	srv    *httptest.Server
	tokens tenant.Tokens
	id     string // the ready sandbox
	token  string // its token
}

func newEnv(t *testing.T, edit func(*Options)) *env {
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
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "t-" + hex.EncodeToString(b[:])
	m, err := session.NewManager(context.Background(), cfg,
		session.WithNamespace(ns), session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))
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
	opts := Options{Tokens: tenant.NewTokens(secret), PingInterval: 200 * time.Millisecond}
	if edit != nil {
		edit(&opts)
	}
	h := newHandler(m, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, m: m, h: h, srv: srv, tokens: opts.Tokens}
	e.id = e.sandbox("sbx-a")
	e.token = e.tokenOf(tenant.Local, e.id)
	return e
}

// sandbox starts a sandbox of the local tenant, as the lifecycle API does.
func (e *env) sandbox(id string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := e.m.Start(ctx, tenant.Local.SessionKey(id)); err != nil {
		e.t.Fatalf("start sandbox %s: %v", id, err)
	}
	return id
}

// tokenOf issues t's token of sandbox id as the lifecycle API does: for
// its current container, or for none when it has none.
func (e *env) tokenOf(t tenant.Tenant, id string) string {
	e.t.Helper()
	info, err := e.m.Info(context.Background(), t.SessionKey(id), session.WithoutMemoryUse())
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		e.t.Fatalf("info of sandbox %s: %v", id, err)
	}
	return e.tokens.Issue(t, id, info.ContainerID)
}

// req sends a request to the ready sandbox's route with its token.
func (e *env) req(method, route string, body io.Reader, hdr ...string) *http.Response {
	e.t.Helper()
	return e.reqAs(e.id, e.token, method, route, body, hdr...)
}

func (e *env) reqAs(id, token, method, route string, body io.Reader, hdr ...string) *http.Response {
	e.t.Helper()
	r, err := http.NewRequest(method, e.srv.URL+"/execd/"+id+route, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		r.Header.Set(TokenHeader, token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, route, err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// readAll returns the body as text.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

// wantStatus checks a status and returns the body.
func wantStatus(t *testing.T, resp *http.Response, status int) string {
	t.Helper()
	body := readAll(t, resp)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	return body
}

// wantError checks an OpenSandbox-shaped error answer.
func wantError(t *testing.T, resp *http.Response, status int, code string) string {
	t.Helper()
	body := wantStatus(t, resp, status)
	var e struct{ Code, Message string }
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	if e.Code != code || e.Message == "" {
		t.Fatalf("error %+v, want code %s and a message", e, code)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type %q", ct)
	}
	return e.Message
}

// streamEvent is an event as a test reads it.
type streamEvent struct {
	Type           string         `json:"type"`
	Text           *string        `json:"text"`
	ExecutionCount int            `json:"execution_count"`
	ExecutionTime  *int64         `json:"execution_time"`
	Timestamp      int64          `json:"timestamp"`
	Results        map[string]any `json:"results"`
	Error          *struct {
		EName     string   `json:"ename"`
		EValue    string   `json:"evalue"`
		Traceback []string `json:"traceback"`
	} `json:"error"`
	raw string
}

// events reads a stream one event at a time.
type events struct {
	t  *testing.T
	sc *bufio.Scanner
}

func newEvents(t *testing.T, resp *http.Response) *events {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream status %d: %s", resp.StatusCode, readAll(t, resp))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &events{t: t, sc: sc}
}

// next returns the next event, or nil at the end. Every event must be
// one JSON line followed by a blank line, with a timestamp.
func (s *events) next() *streamEvent {
	s.t.Helper()
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			s.t.Fatalf("read stream: %v", err)
		}
		return nil
	}
	line := s.sc.Text()
	var ev streamEvent
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		s.t.Fatalf("event %q: %v", line, err)
	}
	ev.raw = line
	if ev.Timestamp < 1_600_000_000_000 {
		s.t.Fatalf("event without a millisecond timestamp: %s", line)
	}
	if !s.sc.Scan() || s.sc.Text() != "" {
		s.t.Fatalf("event %s not followed by a blank line", line)
	}
	return &ev
}

// all reads the rest of the stream, pings left out.
func (s *events) all() []*streamEvent {
	var out []*streamEvent
	for ev := s.next(); ev != nil; ev = s.next() {
		if ev.Type != evPing {
			out = append(out, ev)
		}
	}
	return out
}

// summary is a stream in short: type:text per event.
func summary(evs []*streamEvent) string {
	var parts []string
	for _, ev := range evs {
		s := ev.Type
		switch {
		case ev.Text != nil:
			s += ":" + *ev.Text
		case ev.Error != nil:
			s += ":" + ev.Error.EName + "=" + ev.Error.EValue
		case ev.Results != nil:
			s += ":" + strings.TrimSpace(ev.Results["text"].(string))
		case ev.Type == evCount:
			s += ":" + itoa(ev.ExecutionCount)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " | ")
}
