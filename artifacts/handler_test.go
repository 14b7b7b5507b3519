package artifacts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
)

// dlStore is an in-memory index and blobstore: artifacts by id, blobs as
// files named by their SHA-256 in a temporary directory.
type dlStore struct {
	dir  string
	arts map[string]artifacts.Artifact
	// getErr, when set, is returned by every Get.
	getErr error
}

func (s *dlStore) Get(_ context.Context, id string) (artifacts.Artifact, error) {
	if s.getErr != nil {
		return artifacts.Artifact{}, s.getErr
	}
	a, ok := s.arts[id]
	if !ok {
		return artifacts.Artifact{}, fmt.Errorf("get artifact %s: %w", id, artifacts.ErrNotFound)
	}
	return a, nil
}

func (s *dlStore) Open(sha string) (io.ReadSeekCloser, error) {
	f, err := os.Open(filepath.Join(s.dir, sha))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open blob %s: %w", sha, artifacts.ErrBlobMissing)
	}
	return f, err
}

// add stores content as artifact id and returns it.
func (s *dlStore) add(t testing.TB, id, name, mimeType, content string) artifacts.Artifact {
	t.Helper()
	h := sha256.Sum256([]byte(content))
	a := artifacts.Artifact{
		ID: id, SessionID: "s1", Name: name, SHA256: hex.EncodeToString(h[:]),
		Size: int64(len(content)), MIME: mimeType, Created: dlT0.Add(-time.Hour),
	}
	if err := os.WriteFile(filepath.Join(s.dir, a.SHA256), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	s.arts[id] = a
	return a
}

var dlT0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type dlFixture struct {
	store  *dlStore
	signer *artifacts.Signer
	srv    *httptest.Server
	logs   *dlLog
}

// dlLog counts the records a slog.Handler receives.
type dlLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *dlLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *dlLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *dlLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *dlLog) WithGroup(string) slog.Handler      { return l }
func (l *dlLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.msgs)
}

// newDL starts the handler on a test server whose clock stands at
// dlT0 + one minute, with three artifacts: "txt" (hello.txt), "html"
// (page.html) and "lost" (whose blob is gone).
func newDL(t *testing.T) *dlFixture {
	t.Helper()
	st := &dlStore{dir: t.TempDir(), arts: map[string]artifacts.Artifact{}}
	st.add(t, "txt", "out/hello.txt", "text/plain; charset=utf-8", "hello, artifact world\n")
	st.add(t, "html", "page.html", "text/html; charset=utf-8", "<script>alert(document.cookie)</script>")
	lost := st.add(t, "lost", "lost.bin", "application/octet-stream", "soon gone")
	os.Remove(filepath.Join(st.dir, lost.SHA256))

	signer := tokSigner(t, artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}}, 10*time.Minute)
	logs := &dlLog{}
	h := artifacts.NewHandler(st, st, signer,
		artifacts.WithHandlerLogger(slog.New(logs)),
		artifacts.WithHandlerClock(func() time.Time { return dlT0.Add(time.Minute) }))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &dlFixture{store: st, signer: signer, srv: srv, logs: logs}
}

// url returns the download URL of id with a token signed at dlT0.
func (f *dlFixture) url(t testing.TB, id string) string {
	t.Helper()
	u, _, err := f.signer.URL(f.srv.URL, id, dlT0)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (f *dlFixture) do(t testing.TB, method, url string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// checkSecurityHeaders checks what every response carries.
func checkSecurityHeaders(t *testing.T, resp *http.Response) {
	t.Helper()
	if got := resp.Header.Get("Content-Security-Policy"); got != "sandbox; default-src 'none'" {
		t.Errorf("Content-Security-Policy = %q", got)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q", got)
	}
}

func TestHandlerErrors(t *testing.T) {
	f := newDL(t)
	expired, _, _ := f.signer.Sign("txt", dlT0.Add(-time.Hour))
	otherKey := tokSigner(t, artifacts.Keys{Current: artifacts.Key{ID: artifacts.KeyID(tokSecretA), Secret: tokSecretB}}, 0)
	forged := tokSign(t, otherKey, "txt", dlT0)
	forTxt := tokSign(t, f.signer, "txt", dlT0)
	forGhost := tokSign(t, f.signer, "ghost", dlT0)

	tests := []struct {
		name, method, path string
		status             int
		code               string
		message            string // part of the message, if checked
	}{
		{"missing token", "GET", "/artifacts/txt", 401, "token_missing", "token"},
		{"empty token", "GET", "/artifacts/txt?token=", 401, "token_missing", ""},
		{"garbage token", "GET", "/artifacts/txt?token=abc", 401, "token_invalid", ""},
		{"bad signature", "GET", "/artifacts/txt?token=" + forged, 401, "token_invalid", ""},
		{"expired", "GET", "/artifacts/txt?token=" + expired, 401, "token_expired", "expired"},
		{"expired, HEAD", "HEAD", "/artifacts/txt?token=" + expired, 401, "", ""},
		{"another artifact", "GET", "/artifacts/html?token=" + forTxt, 403, "token_wrong_artifact", ""},
		{"unknown id", "GET", "/artifacts/ghost?token=" + forGhost, 404, "not_found", ""},
		{"unknown id without token", "GET", "/artifacts/ghost", 401, "token_missing", ""},
		{"blob missing", "GET", "/artifacts/lost?token=" + tokSign(t, f.signer, "lost", dlT0), 410, "gone", ""},
		{"POST", "POST", "/artifacts/txt?token=" + forTxt, 405, "method_not_allowed", ""},
		{"DELETE", "DELETE", "/artifacts/txt?token=" + forTxt, 405, "method_not_allowed", ""},
		{"PUT healthz", "PUT", "/healthz", 405, "method_not_allowed", ""},
		{"no id", "GET", "/artifacts/", 404, "not_found", ""},
		{"nested path", "GET", "/artifacts/a/b?token=" + forTxt, 404, "not_found", ""},
		{"other path", "GET", "/elsewhere", 404, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.do(t, tt.method, f.srv.URL+tt.path, nil)
			checkSecurityHeaders(t, resp)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			if tt.status == 405 && resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow = %q", resp.Header.Get("Allow"))
			}
			if tt.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if tt.method == "HEAD" {
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if e.Error.Code != tt.code || e.Error.Message == "" || !strings.Contains(e.Error.Message, tt.message) {
				t.Errorf("error %+v, want code %q and a message containing %q", e.Error, tt.code, tt.message)
			}
		})
	}
}

func TestHandlerInternalError(t *testing.T) {
	f := newDL(t)
	f.store.getErr = errors.New("database is locked")
	resp, body := f.do(t, "GET", f.url(t, "txt"), nil)
	if resp.StatusCode != 500 || !strings.Contains(string(body), `"internal"`) || strings.Contains(string(body), "locked") {
		t.Errorf("status %d, body %s; want 500 internal without the cause", resp.StatusCode, body)
	}
	if f.logs.count() != 1 {
		t.Errorf("%d log records, want 1", f.logs.count())
	}
}

func TestHandlerGoneLoggedOnce(t *testing.T) {
	f := newDL(t)
	for range 3 {
		if resp, _ := f.do(t, "GET", f.url(t, "lost"), nil); resp.StatusCode != http.StatusGone {
			t.Fatalf("status %d, want 410", resp.StatusCode)
		}
	}
	if n := f.logs.count(); n != 1 {
		t.Errorf("%d log records for three requests, want 1", n)
	}
}

func TestHandlerDownload(t *testing.T) {
	f := newDL(t)
	a := f.store.arts["txt"]
	resp, body := f.do(t, "GET", f.url(t, "txt"), nil)
	if resp.StatusCode != 200 || string(body) != "hello, artifact world\n" {
		t.Fatalf("status %d, body %q", resp.StatusCode, body)
	}
	checkSecurityHeaders(t, resp)
	want := map[string]string{
		"Content-Type":        "text/plain; charset=utf-8",
		"Content-Length":      fmt.Sprint(a.Size),
		"Etag":                `"` + a.SHA256 + `"`,
		"Last-Modified":       a.Created.Format(http.TimeFormat),
		"Content-Disposition": `attachment; filename="hello.txt"; filename*=UTF-8''hello.txt`,
		// Signed at dlT0 for ten minutes, served at dlT0 + 1 minute.
		"Cache-Control":   "private, max-age=540",
		"Accept-Ranges":   "bytes",
		"Referrer-Policy": "no-referrer",
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

func TestHandlerHTMLIsInert(t *testing.T) {
	f := newDL(t)
	resp, _ := f.do(t, "GET", f.url(t, "html"), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	checkSecurityHeaders(t, resp)
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") {
		t.Errorf("Content-Disposition = %q, want an attachment", cd)
	}
}

func TestHandlerConditionalAndRanges(t *testing.T) {
	f := newDL(t)
	a := f.store.arts["txt"]
	u := f.url(t, "txt")
	etag := `"` + a.SHA256 + `"`
	tests := []struct {
		name   string
		method string
		hdr    map[string]string
		status int
		body   string
		check  map[string]string
	}{
		{"HEAD", "HEAD", nil, 200, "", map[string]string{"Content-Length": "22", "Etag": etag}},
		{"If-None-Match", "GET", map[string]string{"If-None-Match": etag}, 304, "", map[string]string{"Etag": etag}},
		{"If-None-Match, other", "GET", map[string]string{"If-None-Match": `"abc"`}, 200, "hello, artifact world\n", nil},
		{"If-Modified-Since", "GET", map[string]string{"If-Modified-Since": dlT0.Format(http.TimeFormat)}, 304, "", nil},
		{"range", "GET", map[string]string{"Range": "bytes=0-4"}, 206, "hello",
			map[string]string{"Content-Range": "bytes 0-4/22", "Content-Length": "5"}},
		{"suffix range", "GET", map[string]string{"Range": "bytes=-6"}, 206, "world\n",
			map[string]string{"Content-Range": "bytes 16-21/22"}},
		{"open range", "GET", map[string]string{"Range": "bytes=7-"}, 206, "artifact world\n", nil},
		{"range, HEAD", "HEAD", map[string]string{"Range": "bytes=0-4"}, 206, "", map[string]string{"Content-Range": "bytes 0-4/22"}},
		{"If-Range matching", "GET", map[string]string{"Range": "bytes=0-4", "If-Range": etag}, 206, "hello", nil},
		{"If-Range stale", "GET", map[string]string{"Range": "bytes=0-4", "If-Range": `"old"`}, 200, "hello, artifact world\n", nil},
		{"unsatisfiable range", "GET", map[string]string{"Range": "bytes=100-200"}, 416, "",
			map[string]string{"Content-Range": "bytes */22"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.do(t, tt.method, u, tt.hdr)
			checkSecurityHeaders(t, resp)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tt.status, body)
			}
			if tt.status != 416 && string(body) != tt.body {
				t.Errorf("body %q, want %q", body, tt.body)
			}
			for k, v := range tt.check {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestHandlerHealthz(t *testing.T) {
	f := newDL(t)
	resp, body := f.do(t, "GET", f.srv.URL+"/healthz", nil)
	checkSecurityHeaders(t, resp)
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Errorf("status %d, body %q", resp.StatusCode, body)
	}
}

func TestHandlerUnderPrefix(t *testing.T) {
	f := newDL(t)
	h := artifacts.NewHandler(f.store, f.store, f.signer)
	mux := http.NewServeMux()
	mux.Handle("/files/", http.StripPrefix("/files", h))
	tok := tokSign(t, f.signer, "txt", time.Now())
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", artifacts.URL("http://x/files", "txt", tok), nil))
	if rec.Code != 200 || rec.Body.String() != "hello, artifact world\n" {
		t.Errorf("status %d, body %q", rec.Code, rec.Body)
	}
}
