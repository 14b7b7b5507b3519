package execd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// newFakeEnv is newEnv over the in-memory driver: no engine, for what only
// the translation decides (the fake kernel runs no commands or files).
func newFakeEnv(t *testing.T) *env {
	t.Helper()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(sessiontest.NewDriver()))
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	opts := Options{Tokens: tenant.NewTokens(secret), PingInterval: 200 * time.Millisecond}
	h := newHandler(m, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
	})
	e := &env{t: t, m: m, h: h, srv: srv, tokens: opts.Tokens}
	e.id = e.sandbox("sbx-a")
	e.token = e.tokenOf(tenant.Local, e.id)
	return e
}

// internalWords are what a message to an API user must never hold: the
// session key the server makes of the sandbox id, Go method names and the
// CLI (the user has neither).
func internalWords(key string) []string {
	return []string{key, "Manager.", "agentbox resume", " KEY"}
}

// checkPublic fails when msg holds an internal word.
func checkPublic(t *testing.T, key, msg string) {
	t.Helper()
	for _, w := range internalWords(key) {
		if strings.Contains(msg, w) {
			t.Errorf("message %q holds %q: an API user knows only the sandbox id and the API", msg, w)
		}
	}
}

// pausedRequests are requests the SDK sends to each execd route, with the
// bodies it sends: every route of routes has one (TestPausedEveryRoute
// checks that a new route gets one).
var pausedRequests = map[string]struct {
	path string
	body string
}{
	"GET /ping":                  {"/ping", ""},
	"GET /metrics":               {"/metrics", ""},
	"POST /command":              {"/command", `{"command":"echo hi","background":false}`},
	"DELETE /command":            {"/command?id=abc", ""},
	"POST /code/context":         {"/code/context", `{"language":"python"}`},
	"GET /code/contexts":         {"/code/contexts?language=python", ""},
	"DELETE /code/contexts":      {"/code/contexts?language=python", ""},
	"POST /code":                 {"/code", `{"code":"print(1)","context":{"language":"python"}}`},
	"DELETE /code":               {"/code?id=ctx", ""},
	"POST /files/upload":         {"/files/upload", ""},
	"GET /files/download":        {"/files/download?path=/tmp/a", ""},
	"GET /files/info":            {"/files/info?path=/tmp/a", ""},
	"DELETE /files":              {"/files?path=/tmp/a", ""},
	"GET /files/search":          {"/files/search?path=/tmp&pattern=*.py", ""},
	"POST /files/mv":             {"/files/mv", `[{"src":"/tmp/a","dest":"/tmp/b"}]`},
	"POST /files/permissions":    {"/files/permissions", `{"/tmp/a":{"mode":644}}`},
	"POST /files/replace":        {"/files/replace", `{"/tmp/a":{"old":"x","new":"y"}}`},
	"GET /directories/list":      {"/directories/list?path=/tmp", ""},
	"POST /directories":          {"/directories", `{"/tmp/d":{"mode":755}}`},
	"DELETE /directories":        {"/directories?path=/tmp/d", ""},
	"POST /session":              {"/session", `{}`},
	"DELETE /session":            {"/session/abc", ""},
	"GET /metrics/watch":         {"/metrics/watch", ""},
	"GET /command/status/{id}":   {"/command/status/abc", ""},
	"GET /command/{id}/logs":     {"/command/abc/logs?cursor=0", ""},
	"GET /code/contexts/{id}":    {"/code/contexts/ctx", ""},
	"DELETE /code/contexts/{id}": {"/code/contexts/ctx", ""},
}

// TestPausedEveryRoute: while a sandbox is paused, every execd route but
// /metrics answers 409 SANDBOX_PAUSED before doing anything (never a 200 stream
// whose error event retry logic reads as a failed command), with a message
// that names the sandbox id and the API call that resumes it, and nothing
// internal.
func TestPausedEveryRoute(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	key := tenant.Local.SessionKey(e.id)
	if err := e.m.Pause(context.Background(), key); err != nil {
		t.Fatalf("pause: %v", err)
	}
	for _, route := range slices.Sorted(func(yield func(string) bool) {
		for r := range routes {
			if !yield(r) {
				return
			}
		}
	}) {
		t.Run(route, func(t *testing.T) {
			req, ok := pausedRequests[route]
			if !ok {
				t.Fatalf("route %s has no request in pausedRequests: add the one the SDK sends", route)
			}
			method, _, _ := strings.Cut(route, " ")
			var body io.Reader
			var hdr []string
			if req.body != "" {
				body = strings.NewReader(req.body)
				hdr = []string{"Content-Type", "application/json"}
			}
			if route == "POST /files/upload" {
				var ct string
				body, ct = multipartBody(t, []upFile{{meta: `{"path":"/tmp/a.txt","mode":644}`, data: "hi"}})
				hdr = []string{"Content-Type", ct}
			}
			if route == "GET /metrics" {
				// The engine's reading, not the sandbox's work: it
				// answers (TestPausedSandbox).
				wantStatus(t, e.req(method, req.path, body, hdr...), http.StatusOK)
				return
			}
			msg := wantError(t, e.req(method, req.path, body, hdr...), http.StatusConflict, codeSandboxPaused)
			want := fmt.Sprintf("POST /v1/sandboxes/%s/resume", e.id)
			if !strings.Contains(msg, e.id) || !strings.Contains(msg, want) {
				t.Errorf("message %q: want the sandbox id and %q", msg, want)
			}
			checkPublic(t, key, msg)
		})
	}
	// Nothing ran: the sandbox is still paused, and resumes.
	info, err := e.m.Info(context.Background(), key, session.WithoutMemoryUse())
	if err != nil || info.State != session.StatePaused {
		t.Fatalf("after the requests: state %q, %v; want paused", info.State, err)
	}
}

// TestPausedMessagesArePublic: an ErrPaused the Manager returns after the
// handler's own check (the sandbox paused meanwhile) answers as the check
// does, without the Manager's words for library users.
func TestPausedMessagesArePublic(t *testing.T) {
	t.Parallel()
	key := tenant.Local.SessionKey("sbx-a")
	c := &call{id: "sbx-a", key: key}
	err := &session.Error{Op: "exec", Key: key, ContainerID: "0123456789abcdef",
		Err: fmt.Errorf("%w: container 0123456789ab is frozen: resume it first (Manager.Resume, agentbox resume KEY)", session.ErrPaused)}
	e := publicErr(c, err)
	if e.Status != http.StatusConflict || e.Code != codeSandboxPaused {
		t.Fatalf("got %d %s, want 409 %s", e.Status, e.Code, codeSandboxPaused)
	}
	if !strings.Contains(e.Message, "POST /v1/sandboxes/sbx-a/resume") {
		t.Errorf("message %q does not name the resume call", e.Message)
	}
	checkPublic(t, key, e.Message)

	// Any other error of the Manager names the sandbox by its id.
	fe := &session.FileError{Op: "write", Key: key, Path: "/etc/x", Err: fmt.Errorf("%w: read-only file system", session.ErrPermission)}
	e = publicErr(c, fe)
	if e.Status != http.StatusForbidden || !strings.Contains(e.Message, `"/etc/x"`) || !strings.Contains(e.Message, "sbx-a") {
		t.Errorf("got %d %q, want 403 naming the path and the sandbox id", e.Status, e.Message)
	}
	checkPublic(t, key, e.Message)
	if !errors.Is(fe, session.ErrPermission) {
		t.Fatal("FileError does not wrap its cause")
	}

	// A long key is cut short in the Manager's text; wrapped once more,
	// the message still names only the id.
	long := strings.Repeat("n", 100)
	tn := tenant.Tenant{ID: "t0123456789abcdef"}
	lc := &call{id: long, key: tn.SessionKey(long)}
	for _, err := range []error{
		fmt.Errorf("logs: %w", &session.Error{Op: "command logs", Key: lc.key, Err: session.ErrUnknownCommand}),
		&session.Error{Op: "exec", Key: lc.key, Err: session.ErrNotFound},
		&session.FileError{Op: "read", Key: lc.key, Path: "/tmp/a", Err: session.ErrFileNotFound},
	} {
		e := publicErr(lc, err)
		if strings.Contains(e.Message, tn.ID) || !strings.Contains(e.Message, long) {
			t.Errorf("%v: message %q, want the id and not the tenant %s", err, e.Message, tn.ID)
		}
	}
}
