package native_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/server/native"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// env is the native API over a real Manager, with the artifact download
// handler on the same server (ARTIFACT_PUBLIC_URL points at it, so the
// signed URLs the API hands out download there).
type env struct {
	url string
	m   *session.Manager
	ns  string
}

func newEnv(t *testing.T, keys []string, edit func(*config.Config), mopts ...session.Option) *env {
	t.Helper()
	cli := dockertest.Engine(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()

	cfg := config.Default()
	dir := t.TempDir()
	cfg.SandboxImage = dockertest.Image(t)
	cfg.Runtime = dockertest.Runtime(t)
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.InterruptGrace = 2 * time.Second
	cfg.TmpfsSizeMB = 64
	cfg.ArtifactPublicURL = base
	if edit != nil {
		edit(&cfg)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "t-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	m, err := session.NewManager(ctx, cfg, append([]session.Option{
		session.WithNamespace(ns),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}),
	}, mopts...)...)
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	dl, err := artifacts.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := native.Options{}
	if keys != nil {
		opts.Keys = tenant.NewKeys(keys)
	}
	mux := http.NewServeMux()
	mux.Handle(artifacts.DownloadPath, dl)
	mux.Handle(native.Prefix, native.NewHandler(m, opts))
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
		dl.Close()
		if err := dockertest.Sweep(ctx, cli, session.LabelNamespace+"="+ns); err != nil {
			t.Errorf("sweep: %v", err)
		}
	})
	return &env{url: base, m: m, ns: ns}
}

// req is one request; key, when set, is sent as the bearer API key.
type req struct {
	method, path, key, body string
	header                  map[string]string
}

func (e *env) do(t *testing.T, r req) (*http.Response, []byte) {
	t.Helper()
	return doURL(t, e.url, r)
}

func doURL(t *testing.T, base string, r req) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, base+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.key != "" {
		hr.Header.Set("Authorization", "Bearer "+r.key)
	}
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", r.method, r.path, err)
	}
	return resp, b
}

// expect checks the status and decodes the JSON body into v (when not nil).
func expect(t *testing.T, resp *http.Response, b []byte, status int, v any) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: body %s: %v", resp.Request.Method, resp.Request.URL.Path, b, err)
		}
	}
}

// expectError checks an error answer: its status and code, in the API's
// shape.
func expectError(t *testing.T, resp *http.Response, b []byte, status int, code string) {
	t.Helper()
	var e struct{ Code, Message string }
	expect(t, resp, b, status, &e)
	if e.Code != code || e.Message == "" {
		t.Fatalf("%s %s: error %s, want code %q and a message", resp.Request.Method, resp.Request.URL.Path, b, code)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type %q", ct)
	}
}

// execution is the JSON of an execution, as a client reads it.
type execution struct {
	ID             string              `json:"id"`
	Session        string              `json:"session"`
	Status         string              `json:"status"`
	ExecutionCount int                 `json:"execution_count"`
	Stdout         string              `json:"stdout"`
	Stderr         string              `json:"stderr"`
	Results        []map[string]string `json:"results"`
	Error          *struct {
		Name, Value string
	} `json:"error"`
	Interrupted bool               `json:"interrupted"`
	TimedOut    bool               `json:"timed_out"`
	Replayed    bool               `json:"replayed"`
	Artifacts   []session.Artifact `json:"artifacts"`
}

func execBody(code, id string) string {
	b, _ := json.Marshal(map[string]string{"code": code, "id": id})
	if id == "" {
		b, _ = json.Marshal(map[string]string{"code": code})
	}
	return string(b)
}

// sseEvent is one server-sent event.
type sseEvent struct {
	id, name, data string
}

// eventStream reads server-sent events from a streaming response.
type eventStream struct {
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// openStream sends r asking for events and returns the open stream; the
// caller closes it (which disconnects, as a client that goes away).
func (e *env) openStream(t *testing.T, r req) *eventStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, e.url+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Accept", "text/event-stream")
	if r.key != "" {
		hr.Header.Set("Authorization", "Bearer "+r.key)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		cancel()
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	return &eventStream{resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
}

func (s *eventStream) Close() {
	s.cancel()
	s.resp.Body.Close()
}

// next reads one event, checking the framing: every line is a field this
// API sends (id, event, data) or a comment, and each event has all three.
// io.EOF when the stream ended.
func (s *eventStream) next(t *testing.T) (sseEvent, error) {
	t.Helper()
	var ev sseEvent
	fields := 0
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && fields == 0 && line == "" {
				return ev, io.EOF
			}
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if fields == 0 {
				continue
			}
			if ev.id == "" || ev.name == "" || ev.data == "" {
				t.Fatalf("event without id, event or data: %+v", ev)
			}
			return ev, nil
		case strings.HasPrefix(line, ":"):
			continue
		case strings.HasPrefix(line, "id: "):
			ev.id = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			if ev.data != "" {
				t.Fatalf("event with two data lines: %+v", ev)
			}
			ev.data = line[len("data: "):]
		default:
			t.Fatalf("unexpected line in event stream: %q", line)
		}
		fields++
	}
}

// all reads the events to the end of the stream.
func (s *eventStream) all(t *testing.T) []sseEvent {
	t.Helper()
	var evs []sseEvent
	for {
		ev, err := s.next(t)
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatalf("read events: %v (so far %+v)", err, evs)
		}
		evs = append(evs, ev)
	}
}

// text joins the text of the events of stream name.
func text(t *testing.T, evs []sseEvent, name string) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range evs {
		if ev.name == name {
			var d struct{ Text string }
			if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
				t.Fatalf("event %+v: %v", ev, err)
			}
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// final returns the stream's last event, which must be its result.
func final(t *testing.T, evs []sseEvent) execution {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	last := evs[len(evs)-1]
	if last.name != "result" || last.id != "done" {
		t.Fatalf("last event %+v, want a result with id done", last)
	}
	var x execution
	if err := json.Unmarshal([]byte(last.data), &x); err != nil {
		t.Fatal(err)
	}
	return x
}
