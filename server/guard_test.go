package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

const guardKey = "a-key-0123456789abcdef"

// fakeServer runs server.Run on a loopback port over the in-memory driver,
// with every API mounted as a handler that counts its calls and answers 200
// (or the status a test asks for in the X-Answer header). It returns the
// server's address and the count of requests an API saw.
func fakeServer(t *testing.T, cfg config.Config, keys *tenant.Keys, opts server.Options) (addr string, reached *atomic.Int64) {
	t.Helper()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(sessiontest.NewDriver()))
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	reached = new(atomic.Int64)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		code := http.StatusOK
		if a := r.Header.Get("X-Answer"); a != "" {
			fmt.Sscan(a, &code)
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	mounts := server.Mounts{OpenSandbox: api, Execd: api, MCP: api, Native: api, Artifacts: api, Metrics: api}
	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	opts.Listener = ln
	opts.Keys = keys
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg, m, mounts, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return ln.Addr().String(), reached
}

// send makes one request on a fresh connection, so that Host, Origin and
// the rest are exactly what the test says (net/http would fill some in).
func send(t *testing.T, addr, method, path string, header map[string]string, body string) (int, *http.Response, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, path)
	if _, ok := header["Host"]; !ok {
		fmt.Fprintf(&b, "Host: %s\r\n", addr)
	}
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	if body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: read response: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp, string(data)
}

// TestBrowsersCannotDriveTheServer: a web page on another origin cannot
// make a server run anything, with or without API keys: not with a "simple"
// cross-site request (text/plain, a form, no Content-Type), not through DNS
// rebinding (another Host) on a keyless server. SDK clients, which send
// JSON and no Origin, are unaffected; artifact links open from anywhere.
func TestBrowsersCannotDriveTheServer(t *testing.T) {
	json := map[string]string{"Content-Type": "application/json"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range json {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	type req struct {
		name, method, path string
		header             map[string]string
		body               string
	}
	// refused in both modes
	refused := []req{
		{"cross-site text/plain create", "POST", "/v1/sandboxes", map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, `{"image":{"uri":"python"}}`},
		{"text/plain without Origin", "POST", "/v1/sandboxes", map[string]string{"Content-Type": "text/plain"}, `{"image":{"uri":"python"}}`},
		{"form post", "POST", "/v1/agentbox/sessions/s/executions", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, `{"code":"1"}`},
		{"no Content-Type", "POST", "/v1/agentbox/sessions/s/executions", nil, `{"code":"1"}`},
		{"JSON from another origin", "POST", "/v1/sandboxes", with(map[string]string{"Origin": "http://evil.example"}), `{}`},
		{"JSON from another port of this host", "POST", "/mcp", with(map[string]string{"Origin": "http://127.0.0.1:1"}), `{}`},
		{"Origin null (sandboxed frame)", "POST", "/v1/sandboxes", with(map[string]string{"Origin": "null"}), `{}`},
		{"Sec-Fetch-Site cross-site", "GET", "/v1/sandboxes", map[string]string{"Sec-Fetch-Site": "cross-site"}, ""},
		{"Sec-Fetch-Site same-site", "GET", "/v1/agentbox/sessions/s", map[string]string{"Sec-Fetch-Site": "same-site"}, ""},
		{"multipart outside the upload route", "POST", "/v1/sandboxes", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, "--x--"},
	}
	// served in both modes
	served := []req{
		{"SDK JSON", "POST", "/v1/sandboxes", json, `{}`},
		{"JSON with a charset", "POST", "/v1/agentbox/sessions/s/executions", map[string]string{"Content-Type": "application/json; charset=utf-8"}, `{"code":"1"}`},
		{"same-origin browser", "POST", "/v1/sandboxes", with(map[string]string{"Sec-Fetch-Site": "same-origin"}), `{}`},
		{"GET without a body", "GET", "/v1/sandboxes", nil, ""},
		{"upload as multipart", "POST", "/execd/sb/files/upload", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, "--x--"},
		{"artifact link opened from a chat page", "GET", "/artifacts/a1?token=x", map[string]string{"Sec-Fetch-Site": "cross-site"}, ""},
		{"healthz", "GET", "/healthz", nil, ""},
	}
	rebinding := []req{
		{"rebound name", "GET", "/v1/sandboxes", map[string]string{"Host": "rebind.evil.example:8080"}, ""},
		{"rebound name, JSON create", "POST", "/v1/sandboxes", with(map[string]string{"Host": "rebind.evil.example"}), `{}`},
		{"a public address", "GET", "/v1/agentbox/sessions/s", map[string]string{"Host": "203.0.113.7:8080"}, ""},
		{"no Host", "GET", "/v1/sandboxes", map[string]string{"Host": ""}, ""},
	}
	local := []req{
		{"localhost", "GET", "/v1/sandboxes", map[string]string{"Host": "localhost:8080"}, ""},
		{"LOCALHOST.", "GET", "/v1/sandboxes", map[string]string{"Host": "LOCALHOST."}, ""},
		{"a .localhost name", "GET", "/v1/sandboxes", map[string]string{"Host": "app.localhost:1"}, ""},
		{"::1", "GET", "/v1/sandboxes", map[string]string{"Host": "[::1]:8080"}, ""},
		{"127.0.0.2", "GET", "/v1/sandboxes", map[string]string{"Host": "127.0.0.2"}, ""},
		{"an allowed name", "GET", "/v1/sandboxes", map[string]string{"Host": "agentbox.internal:8080"}, ""},
	}
	cfg := config.Default()
	cfg.ServeAllowedHosts = []string{"agentbox.internal"}
	for _, mode := range []struct {
		name string
		keys *tenant.Keys
	}{{"keyless", nil}, {"with keys", tenant.NewKeys([]string{guardKey})}} {
		t.Run(mode.name, func(t *testing.T) {
			addr, reached := fakeServer(t, cfg, mode.keys, server.Options{})
			check := func(r req, wantServed bool) {
				t.Helper()
				before := reached.Load()
				code, hdr, body := send(t, addr, r.method, r.path, r.header, r.body)
				got := reached.Load() > before || (r.path == "/healthz" && code == 200)
				if got != wantServed {
					t.Errorf("%s: %s %s answered %d %s; reached the API: %v, want %v", r.name, r.method, r.path, code, body, got, wantServed)
				}
				if !wantServed {
					if code != http.StatusForbidden && code != http.StatusUnsupportedMediaType && code != http.StatusMisdirectedRequest {
						t.Errorf("%s: status %d, want 403, 415 or 421", r.name, code)
					}
					if !strings.Contains(body, `"code"`) || !strings.Contains(body, `"message"`) {
						t.Errorf("%s: body %q does not say why", r.name, body)
					}
					if !hdr.Close {
						t.Errorf("%s: a refusal keeps the connection (no Connection: close)", r.name)
					}
				}
			}
			for _, r := range refused {
				check(r, false)
			}
			for _, r := range served {
				check(r, true)
			}
			for _, r := range local {
				check(r, true)
			}
			for _, r := range rebinding {
				// With keys, the key protects the server wherever it is
				// reached from; without, only loopback names reach it.
				check(r, mode.keys != nil)
			}
		})
	}
}

// TestRefusalsCloseTheConnection: a 401, 403 or 413 closes the connection,
// so that a client refused cannot keep it (and the body it still sends).
func TestRefusalsCloseTheConnection(t *testing.T) {
	cfg := config.Default()
	cfg.FilesMaxCallMB = 1
	addr, _ := fakeServer(t, cfg, tenant.NewKeys([]string{guardKey}), server.Options{})
	for _, code := range []int{401, 403, 413} {
		_, hdr, _ := send(t, addr, "GET", "/v1/sandboxes", map[string]string{"X-Answer": fmt.Sprint(code)}, "")
		if !hdr.Close {
			t.Errorf("an API's %d keeps the connection (no Connection: close)", code)
		}
	}
	code, hdr, _ := send(t, addr, "POST", "/v1/sandboxes", map[string]string{"Content-Type": "application/json"}, strings.Repeat("x", 3<<20))
	if code != http.StatusRequestEntityTooLarge || !hdr.Close {
		t.Errorf("a body over the cap: %d, close %v; want 413 and Connection: close", code, hdr.Close)
	}
}

// TestSlowBodyIsCutOff: a client that sends its headers and then trickles
// its body is cut off once the body is overdue, key or no key: it cannot
// hold a connection (and a descriptor) for as long as it likes.
func TestSlowBodyIsCutOff(t *testing.T) {
	addr, reached := fakeServer(t, config.Default(), tenant.NewKeys([]string{guardKey}), server.Options{BodyTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "POST /v1/sandboxes HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr); err != nil {
		t.Fatal(err)
	}
	// A safety bound only: the server must give up long before.
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	start := time.Now()
	// Keep trickling a byte now and then: the server must not wait for it.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	_, err = io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server still held a trickling body after %v", time.Since(start).Round(time.Second))
	}
	t.Logf("cut off after %v (reached the API %d times)", time.Since(start).Round(time.Millisecond), reached.Load())
}

// TestConnectionsPerClient: one client address cannot hold more than
// SERVE_MAX_CONNS_PER_CLIENT connections; the next is answered 429 and
// closed, and other addresses are served all the while.
func TestConnectionsPerClient(t *testing.T) {
	cfg := config.Default()
	cfg.ServeMaxConnsPerClient = 3
	addr, _ := fakeServer(t, cfg, nil, server.Options{})
	from := func(ip string) *net.Dialer {
		return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 3 {
		c, err := from("127.0.0.2").Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		// One request each, so the server has surely accepted them.
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: %v %v", len(held), err, resp)
		}
		resp.Body.Close()
	}
	extra, err := from("127.0.0.2").Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(extra, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
	if err != nil {
		t.Fatalf("the 4th connection of one address: %v, want a 429", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "SERVE_MAX_CONNS_PER_CLIENT") {
		t.Errorf("the 4th connection of one address: %d %s, want 429 naming SERVE_MAX_CONNS_PER_CLIENT", resp.StatusCode, body)
	}
	c, err := from("127.0.0.3").Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Errorf("another address, while the first is at its cap: %v %v", err, resp)
	}
	// A connection given back makes room again.
	held[0].Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := from("127.0.0.2").Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err == nil && resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection was never given back: %v %v", err, resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMetricsNeedTheirKey: with API keys, /metrics (which counts every
// tenant's work) needs SERVE_METRICS_KEY, not a tenant's key.
func TestMetricsNeedTheirKey(t *testing.T) {
	const metricsKey = "metrics-key-0123456789"
	cfg := config.Default()
	cfg.ServeMetricsKey = metricsKey
	addr, reached := fakeServer(t, cfg, tenant.NewKeys([]string{guardKey}), server.Options{})
	for _, auth := range []string{"", "Bearer " + guardKey, "Bearer wrong"} {
		h := map[string]string{}
		if auth != "" {
			h["Authorization"] = auth
		}
		before := reached.Load()
		if code, _, body := send(t, addr, "GET", "/metrics", h, ""); code != http.StatusUnauthorized || reached.Load() != before {
			t.Errorf("/metrics with %q: %d %s, want 401", auth, code, body)
		}
	}
	if code, _, body := send(t, addr, "GET", "/metrics", map[string]string{"Authorization": "Bearer " + metricsKey}, ""); code != 200 {
		t.Errorf("/metrics with its key: %d %s", code, body)
	}

	cfg.ServeMetricsKey = ""
	addr, _ = fakeServer(t, cfg, tenant.NewKeys([]string{guardKey}), server.Options{})
	if code, _, body := send(t, addr, "GET", "/metrics", map[string]string{"Authorization": "Bearer " + guardKey}, ""); code != http.StatusForbidden || !strings.Contains(body, "SERVE_METRICS_KEY") {
		t.Errorf("/metrics on a server with keys and no metrics key: %d %s, want 403 naming SERVE_METRICS_KEY", code, body)
	}
	addr, _ = fakeServer(t, cfg, nil, server.Options{})
	if code, _, body := send(t, addr, "GET", "/metrics", nil, ""); code != 200 {
		t.Errorf("/metrics on a keyless loopback server: %d %s", code, body)
	}
}

// TestRefusesSharedDatasetsWithKeys: tenants never share a dataset cache;
// a server with keys refuses the scopes that would.
func TestRefusesSharedDatasetsWithKeys(t *testing.T) {
	for _, scope := range []string{config.CacheShared, config.CacheNamespace} {
		cfg := config.Default()
		cfg.DatasetCacheScope = scope
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
		// A server that starts anyway serves until this ends.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = server.Run(ctx, cfg, m, server.Mounts{}, server.Options{Keys: tenant.NewKeys([]string{guardKey}), Listener: ln})
		cancel()
		if !errors.Is(err, server.ErrSharedDatasets) || !strings.Contains(err.Error(), "DATASET_CACHE_SCOPE") {
			t.Errorf("DATASET_CACHE_SCOPE=%s with keys: %v, want ErrSharedDatasets", scope, err)
		}
	}
	cfg := config.Default()
	cfg.DatasetCacheScope = config.CacheShared
	if addr, _ := fakeServer(t, cfg, nil, server.Options{}); addr == "" {
		t.Error("a keyless server (one tenant) may share its cache")
	}
}
