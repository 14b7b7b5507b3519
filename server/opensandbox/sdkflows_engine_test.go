package opensandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// The OpenSandbox Python SDK's programs, driven over the wire from Go with
// the requests the SDK sends (sdks/sandbox/python and
// sdks/code-interpreter/python of OpenSandbox's repository): its headers,
// its JSON fields and defaults (resource {"cpu": "1", "memory": "2Gi"},
// entrypoint ["tail", "-f", "/dev/null"], timeout 600 s), the endpoint
// lookups and the ping polling of Sandbox.create, its multipart upload and
// its event streams. The server is agentbox serve's handler over a Manager
// with default settings (config.Default(), only the test's folders, image
// and namespace set): the programs must run unchanged with them.

// sdkUserAgent is what the SDK sends (ConnectionConfig.user_agent).
const sdkUserAgent = "OpenSandbox-Python-SDK/0.1.10"

// sdkExecdPort and sdkEgressPort are the ports Sandbox.create resolves
// (opensandbox.constants).
const (
	sdkExecdPort  = 44772
	sdkEgressPort = 18080
)

// sdkKey is the API key of the flows' ConnectionConfig.
const sdkKey = "sdk-flow-key-0123456789abcdef"

// sdkServer is agentbox serve with default settings on a test server.
type sdkServer struct {
	t    *testing.T
	base string // http://127.0.0.1:port
	logs *lockedBuffer
}

func newSDKServer(t *testing.T) *sdkServer {
	t.Helper()
	cli := dockertest.Engine(t)
	cfg := config.Default()
	dir := t.TempDir()
	cfg.SandboxImage = dockertest.Image(t)
	cfg.Runtime = dockertest.Runtime(t)
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "t-" + hex.EncodeToString(b[:])
	opts := append(server.SessionOptions(), session.WithNamespace(ns),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))
	m, err := session.NewManager(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	keys := tenant.NewKeys([]string{sdkKey})
	s := &sdkServer{t: t, logs: &lockedBuffer{}}
	log := slog.New(slog.NewTextHandler(s.logs, nil))
	h := server.Handler(server.APIs(m, cfg, keys, tenant.NewTokens(secret), nil, log),
		server.Policy{MaxBody: server.MaxBodyBytes(cfg)})
	srv := httptest.NewServer(h)
	s.base = srv.URL
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", s.logs.String())
		}
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
		if err := dockertest.Sweep(ctx, cli, session.LabelNamespace+"="+ns); err != nil {
			t.Errorf("sweep: %v", err)
		}
	})
	return s
}

// sdkAnswer is one response, its body read.
type sdkAnswer struct {
	status int
	header http.Header
	body   []byte
}

// sdkError is what the SDK makes of an error body (_parse_error_body):
// the code and message of {"code", "message"} (or of {"detail": {...}}).
func (a sdkAnswer) sdkError() (code, message string) {
	var body map[string]any
	if json.Unmarshal(a.body, &body) != nil {
		return "UNEXPECTED_RESPONSE", string(a.body)
	}
	if d, ok := body["detail"].(map[string]any); ok {
		body = d
	}
	code, _ = body["code"].(string)
	message, _ = body["message"].(string)
	return code, message
}

func (a sdkAnswer) String() string {
	return fmt.Sprintf("HTTP %d %s", a.status, strings.TrimSpace(string(a.body)))
}

// send makes one request and reads its answer.
func (s *sdkServer) send(req *http.Request) sdkAnswer {
	s.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read: %v", req.Method, req.URL, err)
	}
	return sdkAnswer{status: resp.StatusCode, header: resp.Header, body: body}
}

// lifecycle is a request of the SDK's lifecycle client: base
// http://domain/v1, its User-Agent and API key header, httpx's JSON body.
func (s *sdkServer) lifecycle(method, path string, body any) sdkAnswer {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.base+"/v1"+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("User-Agent", sdkUserAgent)
	req.Header.Set("OPEN-SANDBOX-API-KEY", sdkKey)
	req.Header.Set("Accept", "*/*")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return s.send(req)
}

// sdkSandbox is a Sandbox of the SDK: its id and the execd endpoint it
// resolved (address and headers).
type sdkSandbox struct {
	s        *sdkServer
	id       string
	endpoint string // host:port/execd/<id>
	headers  map[string]string
}

// createRequest is the body Sandbox.create sends for image with the
// SDK's defaults (SandboxModelConverter.to_api_create_sandbox_request):
// env and metadata only when not empty, extensions never when empty.
func createRequest(image string, timeout *time.Duration, env, metadata map[string]string) map[string]any {
	body := map[string]any{
		"image":          map[string]any{"uri": image},
		"resourceLimits": map[string]string{"cpu": "1", "memory": "2Gi"},
		"entrypoint":     []string{"tail", "-f", "/dev/null"},
		"secureAccess":   false,
		"timeout":        nil,
	}
	if timeout != nil {
		body["timeout"] = int(timeout.Seconds())
	}
	if len(env) > 0 {
		body["env"] = env
	}
	if len(metadata) > 0 {
		body["metadata"] = metadata
	}
	return body
}

// create is Sandbox.create: POST /v1/sandboxes, the endpoints of the
// execd and egress ports, then ping every 200 ms until ready (30 s).
func (s *sdkServer) create(body map[string]any) (*sdkSandbox, error) {
	s.t.Helper()
	a := s.lifecycle("POST", "/sandboxes", body)
	if a.status >= 300 {
		return nil, fmt.Errorf("Sandbox.create: POST /v1/sandboxes: %s", a)
	}
	var created struct{ ID string }
	if err := json.Unmarshal(a.body, &created); err != nil || created.ID == "" {
		return nil, fmt.Errorf("Sandbox.create: no id in %s", a)
	}
	sb := &sdkSandbox{s: s, id: created.ID}
	if err := sb.resolve(); err != nil {
		return sb, err
	}
	return sb, sb.checkReady()
}

// resolve asks for the endpoints as create, connect and resume do.
func (sb *sdkSandbox) resolve() error {
	for _, port := range []int{sdkExecdPort, sdkEgressPort} {
		a := sb.s.lifecycle("GET", fmt.Sprintf("/sandboxes/%s/endpoints/%d?use_server_proxy=false", sb.id, port), nil)
		if a.status != http.StatusOK {
			return fmt.Errorf("get endpoint %d: %s", port, a)
		}
		var ep struct {
			Endpoint string            `json:"endpoint"`
			Headers  map[string]string `json:"headers"`
		}
		if err := json.Unmarshal(a.body, &ep); err != nil {
			return fmt.Errorf("endpoint %d: %w", port, err)
		}
		if port == sdkExecdPort {
			sb.endpoint, sb.headers = ep.Endpoint, ep.Headers
		}
	}
	return nil
}

// checkReady is Sandbox.check_ready: GET /ping until 200, within 30 s.
func (sb *sdkSandbox) checkReady() error {
	deadline := time.Now().Add(30 * time.Second)
	var last sdkAnswer
	for time.Now().Before(deadline) {
		if last = sb.execd("GET", "/ping", nil, ""); last.status == http.StatusOK {
			return nil
		}
		time.Sleep(200 * time.Millisecond) // the SDK's health_check_polling_interval
	}
	return fmt.Errorf("sandbox %s not ready in 30 s: last ping %s", sb.id, last)
}

// execd is a request of the SDK's execd clients: http://endpoint, its
// User-Agent and the endpoint's headers (the access token).
func (sb *sdkSandbox) execd(method, path string, body io.Reader, contentType string, extra ...string) sdkAnswer {
	sb.s.t.Helper()
	return sb.s.send(sb.execdRequest(method, path, body, contentType, extra...))
}

func (sb *sdkSandbox) execdRequest(method, path string, body io.Reader, contentType string, extra ...string) *http.Request {
	sb.s.t.Helper()
	req, err := http.NewRequest(method, "http://"+sb.endpoint+path, body)
	if err != nil {
		sb.s.t.Fatal(err)
	}
	req.Header.Set("User-Agent", sdkUserAgent)
	for k, v := range sb.headers {
		req.Header.Set(k, v)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	return req
}

// sdkEvent is one event of an execd stream, as the SDK's dispatcher reads
// it.
type sdkEvent struct {
	Type    string            `json:"type"`
	Text    string            `json:"text"`
	Results map[string]string `json:"results"`
	Error   *struct {
		Name      string   `json:"ename"`
		Value     string   `json:"evalue"`
		Traceback []string `json:"traceback"`
	} `json:"error"`
	at time.Time // when it arrived
}

// execution is the SDK's Execution: logs, results, error, and the exit
// code commands.run infers (the error's value, or 0 when complete).
type execution struct {
	stdout, stderr []sdkEvent
	results        []string
	err            *sdkEvent
	complete       *sdkEvent
}

func (x *execution) exitCode() (int, bool) {
	if x.err != nil {
		var n int
		if _, err := fmt.Sscanf(x.err.Error.Value, "%d", &n); err != nil {
			return 0, false
		}
		return n, true
	}
	return 0, x.complete != nil
}

func (x *execution) stdoutText() string {
	var parts []string
	for _, ev := range x.stdout {
		parts = append(parts, ev.Text)
	}
	return strings.Join(parts, "\n")
}

func (x *execution) String() string {
	s := fmt.Sprintf("stdout %q", x.stdoutText())
	if len(x.stderr) > 0 {
		var parts []string
		for _, ev := range x.stderr {
			parts = append(parts, ev.Text)
		}
		s += fmt.Sprintf(" stderr %q", strings.Join(parts, "\n"))
	}
	if x.err != nil {
		s += fmt.Sprintf(" error %s: %s %q", x.err.Error.Name, x.err.Error.Value, x.err.Error.Traceback)
	}
	return s
}

// stream is _execute_streaming_request: POST json to path with the SSE
// client's headers; a status other than 200 is the SDK's
// SandboxApiException (its status and body returned as the error).
func (sb *sdkSandbox) stream(path string, body any) (*execution, error) {
	sb.s.t.Helper()
	data, _ := json.Marshal(body)
	req := sb.execdRequest("POST", path, bytes.NewReader(data), "application/json",
		"Accept", "text/event-stream", "Cache-Control", "no-cache")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		sb.s.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, &sdkAPIError{sdkAnswer{status: resp.StatusCode, header: resp.Header, body: b}}
	}
	x := &execution{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, ":") || strings.HasPrefix(line, "event:") {
			continue
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		var ev sdkEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			sb.s.t.Fatalf("POST %s: event %q: %v", path, line, err)
		}
		ev.at = time.Now()
		switch ev.Type {
		case "stdout":
			x.stdout = append(x.stdout, ev)
		case "stderr":
			x.stderr = append(x.stderr, ev)
		case "result":
			x.results = append(x.results, ev.Results["text"])
		case "error":
			x.err = &ev
		case "execution_complete":
			x.complete = &ev
		}
	}
	if err := sc.Err(); err != nil {
		sb.s.t.Fatalf("POST %s: read stream: %v", path, err)
	}
	return x, nil
}

// sdkAPIError is the SDK's SandboxApiException for an answer.
type sdkAPIError struct{ a sdkAnswer }

func (e *sdkAPIError) Error() string { return e.a.String() }

// run is commands.run(command) with no options: {"command": ...} alone.
func (sb *sdkSandbox) run(command string) (*execution, error) {
	return sb.stream("/command", map[string]any{"command": command})
}

// runCode is CodeInterpreter.codes.run(code): the default context of the
// language, {"code", "context": {"language": "python"}}.
func (sb *sdkSandbox) runCode(code string) (*execution, error) {
	return sb.stream("/code", map[string]any{"code": code, "context": map[string]any{"language": "python"}})
}

// writeEntry is the SDK's WriteEntry.
type writeEntry struct {
	path, data string
	mode       int // the SDK's default is 755
}

// writeFiles is files.write_files: per entry a "metadata" part (named
// "metadata", JSON as Python's json.dumps writes it) and a "file" part
// named after the path, text/plain for str data.
func (sb *sdkSandbox) writeFiles(entries ...writeEntry) sdkAnswer {
	sb.s.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, e := range entries {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
		h.Set("Content-Type", "application/json")
		w, _ := mw.CreatePart(h)
		fmt.Fprintf(w, `{"path": %q, "owner": null, "group": null, "mode": %d}`, e.path, e.mode)
		h = textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, e.path))
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w, _ = mw.CreatePart(h)
		io.WriteString(w, e.data)
	}
	mw.Close()
	return sb.execd("POST", "/files/upload", &b, mw.FormDataContentType())
}

// readFile is files.read_file: GET /files/download?path=.
func (sb *sdkSandbox) readFile(path string) sdkAnswer {
	return sb.execd("GET", "/files/download?"+url.Values{"path": {path}}.Encode(), nil, "")
}

// search is files.search(SearchEntry(path, pattern)).
func (sb *sdkSandbox) search(path, pattern string) ([]string, sdkAnswer) {
	a := sb.execd("GET", "/files/search?"+url.Values{"path": {path}, "pattern": {pattern}}.Encode(), nil, "")
	var found []struct {
		Path string `json:"path"`
	}
	_ = json.Unmarshal(a.body, &found)
	var paths []string
	for _, f := range found {
		paths = append(paths, f.Path)
	}
	return paths, a
}

// info is get_info: GET /v1/sandboxes/{id}.
type sdkInfo struct {
	ID     string `json:"id"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
	Metadata  map[string]string `json:"metadata"`
	ExpiresAt *time.Time        `json:"expiresAt"`
}

func (sb *sdkSandbox) getInfo() (sdkInfo, sdkAnswer) {
	a := sb.s.lifecycle("GET", "/sandboxes/"+sb.id, nil)
	var info sdkInfo
	_ = json.Unmarshal(a.body, &info)
	return info, a
}

// kill is Sandbox.kill: DELETE /v1/sandboxes/{id}.
func (sb *sdkSandbox) kill() sdkAnswer {
	return sb.s.lifecycle("DELETE", "/sandboxes/"+sb.id, nil)
}

// TestSDKLangGraphWorkflow is OpenSandbox's examples/langgraph/main.py
// without the LLM: create the sandbox (the SDK's defaults), write the job
// files, run "python3 /tmp/math.py" and the fallback "python
// /tmp/math.py", read the notes back, kill.
func TestSDKLangGraphWorkflow(t *testing.T) {
	t.Parallel()
	s := newSDKServer(t)

	// [create] Sandbox.create(image, connection_config=config): the
	// example's default image, which agentbox runs as its own.
	sb, err := s.create(createRequest("sandbox-registry.cn-zhangjiakou.cr.aliyuncs.com/opensandbox/code-interpreter:v1.1.0",
		ptrDuration(10*time.Minute), nil, nil))
	if err != nil {
		t.Fatalf("[create] %v", err)
	}
	t.Cleanup(func() { sb.kill() })

	// [prepare] files.write_file (the SDK's default mode, 755).
	for _, f := range []writeEntry{
		{"/tmp/math.py", "result = 137 * 42\nprint(result)\n", 755},
		{"/tmp/notes.txt", "LangGraph + OpenSandbox\n", 755},
	} {
		if a := sb.writeFiles(f); a.status != http.StatusOK {
			code, msg := a.sdkError()
			t.Fatalf("[prepare] write_file %s: %s (SDK error %s: %s)", f.path, a, code, msg)
		}
	}

	// [run] the command, then the fallback the example retries with.
	for _, cmd := range []string{"python3 /tmp/math.py", "python /tmp/math.py"} {
		x, err := sb.run(cmd)
		if err != nil {
			t.Errorf("[run] commands.run(%q): %v", cmd, err)
			continue
		}
		if code, ok := x.exitCode(); !ok || code != 0 || x.err != nil || x.stdoutText() != "5754" {
			t.Errorf("[run] commands.run(%q): exit %d (known %v), %s; want 5754 and no error", cmd, code, ok, x)
		}
	}

	// [inspect] files.read_file.
	if a := sb.readFile("/tmp/notes.txt"); a.status != http.StatusOK || string(a.body) != "LangGraph + OpenSandbox\n" {
		t.Errorf("[inspect] read_file /tmp/notes.txt: %s", a)
	}

	// [cleanup] kill.
	if a := sb.kill(); a.status != http.StatusNoContent {
		t.Errorf("[cleanup] kill: %s, want 204", a)
	}
	if info, a := sb.getInfo(); info.Status.State != "Terminated" {
		t.Errorf("[cleanup] get_info after kill: %s, want Terminated", a)
	}
}

func ptrDuration(d time.Duration) *time.Duration { return &d }

// TestSDKQuickStart is the SDK README's quick start and usage examples on
// one sandbox: create with env PYTHONPATH=/app and metadata, a command,
// a streamed command, files written, read, searched and deleted,
// /app/script.py run with python, renew, pause, resume, get_info, the
// code interpreter (its state kept across the pause), kill.
func TestSDKQuickStart(t *testing.T) {
	t.Parallel()
	s := newSDKServer(t)

	// Sandbox.create("python:3.11", timeout=30 min, env, metadata).
	sb, err := s.create(createRequest("python:3.11", ptrDuration(30*time.Minute),
		map[string]string{"PYTHONPATH": "/app"}, map[string]string{"project": "demo"}))
	if err != nil {
		t.Fatalf("[create] %v", err)
	}
	t.Cleanup(func() { sb.kill() })

	// 3. commands.run("echo 'Hello Sandbox!'"); stdout[0].text.
	if x, err := sb.run("echo 'Hello Sandbox!'"); err != nil || len(x.stdout) == 0 || x.stdout[0].Text != "Hello Sandbox!" {
		t.Errorf("[command] echo: %v %v", x, err)
	}

	// Command execution and streaming: the README's loop, its lines
	// arriving while it runs.
	x, err := sb.run(`for i in {1..5}; do echo "Count $i"; sleep 0.5; done`)
	switch {
	case err != nil:
		t.Errorf("[stream] commands.run: %v", err)
	case x.stdoutText() != "Count 1\nCount 2\nCount 3\nCount 4\nCount 5" || x.complete == nil:
		t.Errorf("[stream] commands.run: %s; want Count 1 to Count 5 and execution_complete", x)
	case x.complete.at.Sub(x.stdout[0].at) < time.Second:
		t.Errorf("[stream] the first line came %v before the end: not streamed", x.complete.at.Sub(x.stdout[0].at))
	}

	// Comprehensive file operations: write, read, search, delete.
	if a := sb.writeFiles(writeEntry{"/tmp/hello.txt", "Hello World", 644}); a.status != http.StatusOK {
		t.Errorf("[files] write_files /tmp/hello.txt: %s", a)
	}
	if a := sb.readFile("/tmp/hello.txt"); a.status != http.StatusOK || string(a.body) != "Hello World" {
		t.Errorf("[files] read_file /tmp/hello.txt: %s", a)
	}
	if found, a := sb.search("/tmp", "*.txt"); !strings.Contains(strings.Join(found, " "), "/tmp/hello.txt") {
		t.Errorf("[files] search /tmp *.txt: %v (%s)", found, a)
	}
	if a := sb.execd("DELETE", "/files?path=%2Ftmp%2Fhello.txt", nil, ""); a.status != http.StatusOK {
		t.Errorf("[files] delete_files /tmp/hello.txt: %s", a)
	}
	if a := sb.readFile("/tmp/hello.txt"); a.status != http.StatusNotFound {
		t.Errorf("[files] read_file after delete: %s, want 404", a)
	}

	// PYTHONPATH=/app reaches commands; /app/script.py runs with python.
	if a := sb.writeFiles(
		writeEntry{"/app/helper.py", "GREETING = 'hello from /app'\n", 755},
		writeEntry{"/app/script.py", "import os, helper\nprint(helper.GREETING, os.environ.get('PYTHONPATH'))\n", 755},
	); a.status != http.StatusOK {
		code, msg := a.sdkError()
		t.Errorf("[app] write_files /app/helper.py, /app/script.py: %s (SDK error %s: %s)", a, code, msg)
	}
	if x, err := sb.run("python /app/script.py"); err != nil || x.err != nil || x.stdoutText() != "hello from /app /app" {
		t.Errorf("[app] commands.run(python /app/script.py): %v %v; want hello from /app /app", x, err)
	}
	if x, err := sb.run(`cd / && python3 -c "import helper; print(helper.GREETING)"`); err != nil || x.err != nil || x.stdoutText() != "hello from /app" {
		t.Errorf("[app] a module of PYTHONPATH=/app imported from /: %v %v", x, err)
	}

	// The code interpreter: CodeInterpreter.create(sandbox) asks for the
	// execd endpoint again; state set before the pause.
	if err := sb.resolve(); err != nil {
		t.Fatalf("[code] CodeInterpreter.create: %v", err)
	}
	if x, err := sb.runCode("x = 41"); err != nil || x.err != nil {
		t.Errorf("[code] codes.run(x = 41): %v %v", x, err)
	}
	if x, err := sb.runCode("import os\nos.environ.get('PYTHONPATH')"); err != nil || x.err != nil || len(x.results) != 1 || x.results[0] != "'/app'" {
		t.Errorf("[code] PYTHONPATH in the kernel: %v %v; want '/app'", x, err)
	}

	// Lifecycle: renew, pause (execd refuses with 409 while paused),
	// resume, get_info.
	want := time.Now().Add(30 * time.Minute)
	a := s.lifecycle("POST", "/sandboxes/"+sb.id+"/renew-expiration",
		map[string]string{"expiresAt": want.UTC().Format("2006-01-02T15:04:05.000000") + "+00:00"}) // Python's isoformat()
	if a.status != http.StatusOK {
		t.Errorf("[lifecycle] renew: %s", a)
	}
	if a := s.lifecycle("POST", "/sandboxes/"+sb.id+"/pause", nil); a.status != http.StatusAccepted {
		t.Fatalf("[lifecycle] pause: %s", a)
	}
	if info, a := sb.getInfo(); info.Status.State != "Paused" {
		t.Errorf("[lifecycle] get_info after pause: %s", a)
	}
	if _, err := sb.run("echo while paused"); err == nil {
		t.Errorf("[lifecycle] commands.run while paused: no error")
	} else if ae, ok := err.(*sdkAPIError); !ok || ae.a.status != http.StatusConflict {
		t.Errorf("[lifecycle] commands.run while paused: %v, want 409", err)
	} else if code, _ := ae.a.sdkError(); code != "SANDBOX_PAUSED" {
		t.Errorf("[lifecycle] commands.run while paused: code %q, want SANDBOX_PAUSED", code)
	}
	// Sandbox.resume(sandbox_id, connection_config): resume, endpoints,
	// ping.
	if a := s.lifecycle("POST", "/sandboxes/"+sb.id+"/resume", nil); a.status != http.StatusAccepted {
		t.Fatalf("[lifecycle] resume: %s", a)
	}
	if err := sb.resolve(); err != nil {
		t.Fatalf("[lifecycle] resume: %v", err)
	}
	if err := sb.checkReady(); err != nil {
		t.Fatalf("[lifecycle] resume: %v", err)
	}
	info, a := sb.getInfo()
	if info.Status.State != "Running" || info.Metadata["project"] != "demo" || info.ExpiresAt == nil ||
		info.ExpiresAt.Sub(want).Abs() > time.Minute {
		t.Errorf("[lifecycle] get_info after resume: %s; want Running, metadata project=demo, expiresAt %v", a, want)
	}

	// The kernel kept its state through the pause.
	if x, err := sb.runCode("x + 1"); err != nil || x.err != nil || len(x.results) != 1 || x.results[0] != "42" {
		t.Errorf("[code] codes.run(x + 1) after resume: %v %v; want 42", x, err)
	}

	if a := sb.kill(); a.status != http.StatusNoContent {
		t.Errorf("[kill] %s, want 204", a)
	}
	if info, a := sb.getInfo(); info.Status.State != "Terminated" {
		t.Errorf("[kill] get_info after kill: %s, want Terminated", a)
	}
}
