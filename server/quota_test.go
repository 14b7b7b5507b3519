package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

const (
	quotaKeyA = "quota-key-a-0123456789abcdef"
	quotaKeyB = "quota-key-b-0123456789abcdef"
)

// quotaServer serves every API as agentbox serve does (its Manager made
// with server.SessionOptions) with two tenants; edit sets the quotas.
func quotaServer(t *testing.T, edit func(*config.Config)) *quotaClient {
	t.Helper()
	cfg := testConfig(t)
	cfg.TenantMaxSandboxes, cfg.TenantMaxMemoryMB, cfg.TenantMaxInflight, cfg.TenantMaxArtifactMB = 0, 0, 0, 0
	edit(&cfg)
	ns := namespace()
	cli := dockertest.Engine(t)
	m, err := session.NewManager(context.Background(), cfg, append(server.SessionOptions(), session.WithNamespace(ns),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))...)
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	keys := tenant.NewKeys([]string{quotaKeyA, quotaKeyB})
	tokens := tenant.NewTokens(bytes.Repeat([]byte("q"), 32))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, cfg, m, server.APIs(m, cfg, keys, tokens, nil, nil), server.Options{Keys: keys, Listener: ln})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		sctx, stop := context.WithTimeout(context.Background(), time.Minute)
		defer stop()
		if err := dockertest.Sweep(sctx, cli, session.LabelNamespace+"="+ns); err != nil {
			t.Errorf("sweep: %v", err)
		}
	})
	return &quotaClient{t: t, base: "http://" + ln.Addr().String()}
}

type quotaClient struct {
	t    *testing.T
	base string
}

// do sends a request with tenant key's credentials (both headers: each
// API reads its own) and returns the status and body.
func (c *quotaClient) do(ctx context.Context, key, method, path string, header map[string]string, body string) (int, string) {
	c.t.Helper()
	url := path
	if strings.HasPrefix(path, "/") {
		url = c.base + path
	}
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("OPEN-SANDBOX-API-KEY", key)
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ""
		}
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// create makes an OpenSandbox sandbox of tenant key and returns the status,
// the body and its id.
func (c *quotaClient) create(key string) (int, string, string) {
	c.t.Helper()
	code, body := c.do(context.Background(), key, "POST", "/v1/sandboxes", nil, `{"image": {"uri": "python:3.11"}, "timeout": null}`)
	var sb struct{ ID string }
	_ = json.Unmarshal([]byte(body), &sb)
	return code, body, sb.ID
}

// endpoint is the execd address and headers of sandbox id.
func (c *quotaClient) endpoint(key, id string) (string, map[string]string) {
	c.t.Helper()
	code, body := c.do(context.Background(), key, "GET", "/v1/sandboxes/"+id+"/endpoints/44772", nil, "")
	var ep struct {
		Endpoint string
		Headers  map[string]string
	}
	if err := json.Unmarshal([]byte(body), &ep); code != 200 || err != nil || ep.Endpoint == "" {
		c.t.Fatalf("endpoint of %s: %d %s", id, code, body)
	}
	return "http://" + ep.Endpoint, ep.Headers
}

// refused fails unless the answer is 429 with a JSON body whose message
// names setting.
func refused(t *testing.T, what string, code int, body, setting string) {
	t.Helper()
	var e struct{ Code, Message string }
	if code != http.StatusTooManyRequests || json.Unmarshal([]byte(body), &e) != nil || e.Code == "" || !strings.Contains(e.Message, setting) {
		t.Fatalf("%s: %d %s; want 429 with a JSON code and a message naming %s", what, code, body, setting)
	}
}

// holdCode starts code on execd and returns once the stream began (the
// execution is admitted); cancel ends the request, which interrupts it.
func holdCode(t *testing.T, execd string, headers map[string]string, code string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	q, _ := json.Marshal(map[string]any{"code": code, "context": map[string]string{"language": "python"}})
	req, err := http.NewRequestWithContext(ctx, "POST", execd+"/code", bytes.NewReader(q))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("execd code %q: %d %s", code, resp.StatusCode, data)
	}
	// The first line of the stream is its init event.
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("execd stream: %v", err)
	}
	return func() { cancel(); resp.Body.Close() }
}

// TestTenantQuotaSandboxes: a tenant at TENANT_MAX_SANDBOXES is refused a
// new sandbox on every API that creates one (OpenSandbox's create, the
// native API's first execution of a session), with 429 naming the limit;
// its sandboxes still run, and another tenant is not held back.
func TestTenantQuotaSandboxes(t *testing.T) {
	c := quotaServer(t, func(cfg *config.Config) { cfg.TenantMaxSandboxes = 2 })
	var ids []string
	for range 2 {
		code, body, id := c.create(quotaKeyA)
		if code != http.StatusAccepted {
			t.Fatalf("create under the limit: %d %s", code, body)
		}
		ids = append(ids, id)
	}
	code, body, _ := c.create(quotaKeyA)
	refused(t, "OpenSandbox create past the limit", code, body, "TENANT_MAX_SANDBOXES")
	code, body = c.do(context.Background(), quotaKeyA, "POST", "/v1/agentbox/sessions/fresh/executions", nil, `{"code": "1"}`)
	refused(t, "native execution creating a session past the limit", code, body, "TENANT_MAX_SANDBOXES")

	// Its own sandboxes still run code (the native API names them by id).
	if code, body := c.do(context.Background(), quotaKeyA, "POST", "/v1/agentbox/sessions/"+ids[0]+"/executions", nil, `{"code": "6 * 7"}`); code != 200 || !strings.Contains(body, "42") {
		t.Fatalf("a sandbox of a tenant at its limit: %d %s", code, body)
	}
	if code, body, _ := c.create(quotaKeyB); code != http.StatusAccepted {
		t.Fatalf("another tenant: %d %s", code, body)
	}
	// A deleted sandbox frees its place.
	if code, body := c.do(context.Background(), quotaKeyA, "DELETE", "/v1/sandboxes/"+ids[1], nil, ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, body, _ := c.create(quotaKeyA); code != http.StatusAccepted {
		t.Fatalf("create after a delete: %d %s", code, body)
	}
}

// TestTenantQuotaInflight: executions running or queued count against
// TENANT_MAX_INFLIGHT over all of a tenant's sandboxes; past it execd and
// the native API answer 429 before running anything.
func TestTenantQuotaInflight(t *testing.T) {
	c := quotaServer(t, func(cfg *config.Config) { cfg.TenantMaxInflight = 2 })
	_, body, id := c.create(quotaKeyA)
	if id == "" {
		t.Fatalf("create: %s", body)
	}
	execd, headers := c.endpoint(quotaKeyA, id)
	for range 2 {
		stop := holdCode(t, execd, headers, "import time; time.sleep(60)")
		defer stop()
	}
	q, _ := json.Marshal(map[string]any{"code": "1", "context": map[string]string{"language": "python"}})
	code, body := c.do(context.Background(), "", "POST", execd+"/code", headers, string(q))
	refused(t, "execd code past the limit", code, body, "TENANT_MAX_INFLIGHT")
	code, body = c.do(context.Background(), "", "POST", execd+"/command", headers, `{"command": "true"}`)
	refused(t, "execd command past the limit", code, body, "TENANT_MAX_INFLIGHT")
	code, body = c.do(context.Background(), quotaKeyA, "POST", "/v1/agentbox/sessions/"+id+"/executions", nil, `{"code": "1"}`)
	refused(t, "native execution past the limit", code, body, "TENANT_MAX_INFLIGHT")
	if code, body := c.do(context.Background(), quotaKeyB, "POST", "/v1/agentbox/sessions/b/executions", nil, `{"code": "6 * 7"}`); code != 200 || !strings.Contains(body, "42") {
		t.Fatalf("another tenant: %d %s", code, body)
	}
}

// TestTenantQuotaArtifacts: a tenant whose stored artifacts reach
// TENANT_MAX_ARTIFACT_MB is refused its next execution.
func TestTenantQuotaArtifacts(t *testing.T) {
	c := quotaServer(t, func(cfg *config.Config) { cfg.TenantMaxArtifactMB = 1 })
	write := `{"code": "open('/session/artifacts/big.bin', 'wb').write(b'x' * (2 << 20))"}`
	if code, body := c.do(context.Background(), quotaKeyA, "POST", "/v1/agentbox/sessions/s/executions", nil, write); code != 200 || !strings.Contains(body, "big.bin") {
		t.Fatalf("an execution storing 2 MiB: %d %s", code, body)
	}
	code, body := c.do(context.Background(), quotaKeyA, "POST", "/v1/agentbox/sessions/s/executions", nil, `{"code": "1"}`)
	refused(t, "the next execution", code, body, "TENANT_MAX_ARTIFACT_MB")
	if code, body := c.do(context.Background(), quotaKeyB, "POST", "/v1/agentbox/sessions/s/executions", nil, `{"code": "6 * 7"}`); code != 200 || !strings.Contains(body, "42") {
		t.Fatalf("another tenant: %d %s", code, body)
	}
}

// TestQueuedNativeExecutionDropped: a native execution waiting for its
// session's turn whose client leaves is dropped: when the turn comes, it
// does not run (its side effect never appears).
func TestQueuedNativeExecutionDropped(t *testing.T) {
	// Two in flight: a probe refused for the quota shows the queued
	// execution reached the Manager.
	c := quotaServer(t, func(cfg *config.Config) { cfg.TenantMaxInflight = 2 })
	_, body, id := c.create(quotaKeyA)
	if id == "" {
		t.Fatalf("create: %s", body)
	}
	execd, headers := c.endpoint(quotaKeyA, id)
	stop := holdCode(t, execd, headers, "import time; time.sleep(60)")
	defer stop()
	qctx, leave := context.WithCancel(context.Background())
	queued := make(chan struct{})
	go func() {
		defer close(queued)
		for qctx.Err() == nil {
			code, _ := c.do(qctx, quotaKeyA, "POST", "/v1/agentbox/sessions/"+id+"/executions", nil, `{"code": "open('/session/ran', 'w').write('x')"}`)
			if code != http.StatusTooManyRequests { // a probe held the place: again
				return
			}
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		code, body := c.do(context.Background(), quotaKeyA, "POST", "/v1/agentbox/sessions/probe/executions", nil, `{"code": "1"}`)
		if code == http.StatusTooManyRequests {
			break
		}
		if code != 200 {
			t.Fatalf("probe: %d %s", code, body)
		}
		if time.Now().After(deadline) {
			t.Fatal("the queued execution never counted as in flight")
		}
	}
	leave()
	<-queued
	// The client has gone; the server learns it when it reads the closed
	// connection. Until then the execution still waits for its turn, and
	// interrupting the running code now would hand that turn to it. The
	// probe is admitted again once the dropped execution let go of its place.
	for deadline := time.Now().Add(time.Minute); ; {
		code, body := c.do(context.Background(), quotaKeyA, "POST", "/v1/agentbox/sessions/probe/executions", nil, `{"code": "1"}`)
		if code == 200 {
			break
		}
		if code != http.StatusTooManyRequests {
			t.Fatalf("probe: %d %s", code, body)
		}
		if time.Now().After(deadline) {
			t.Fatal("the execution whose client left still holds its place in flight")
		}
	}
	stop() // interrupts the running code: the session's turn is free
	var code int
	for deadline := time.Now().Add(time.Minute); ; {
		// 429 until the interrupted execution has returned.
		code, body = c.do(context.Background(), quotaKeyA, "POST", "/v1/agentbox/sessions/"+id+"/executions", nil, `{"code": "import os; os.path.exists('/session/ran')"}`)
		if code != http.StatusTooManyRequests || time.Now().After(deadline) {
			break
		}
	}
	if code != 200 || !strings.Contains(body, "False") {
		t.Fatalf("the execution whose client left ran after all: %d %s", code, body)
	}
}

// TestTenantQuotaCreateRace: creations at the limit at the same time,
// through two APIs: exactly one wins.
func TestTenantQuotaCreateRace(t *testing.T) {
	c := quotaServer(t, func(cfg *config.Config) { cfg.TenantMaxSandboxes = 1 })
	codes := make(chan int, 4)
	for i := range 4 {
		go func() {
			if i%2 == 0 {
				code, _, _ := c.create(quotaKeyA)
				codes <- code
				return
			}
			code, _ := c.do(context.Background(), quotaKeyA, "POST", "/v1/agentbox/sessions/race-"+string(rune('a'+i))+"/executions", nil, `{"code": "1"}`)
			if code == 200 {
				code = http.StatusAccepted
			}
			codes <- code
		}()
	}
	won, lost := 0, 0
	for range 4 {
		switch code := <-codes; code {
		case http.StatusAccepted:
			won++
		case http.StatusTooManyRequests:
			lost++
		default:
			t.Errorf("a creation answered %d", code)
		}
	}
	if won != 1 || lost != 3 {
		t.Fatalf("%d creations won, %d refused; want 1 and 3", won, lost)
	}
}

// TestExecdWorkWhoseClientLeft: execd's code and command runs are streams
// with no way to fetch their outcome later, so a client that leaves
// interrupts them: what they would have done after never happens.
func TestExecdWorkWhoseClientLeft(t *testing.T) {
	c := quotaServer(t, func(*config.Config) {})
	_, body, id := c.create(quotaKeyA)
	if id == "" {
		t.Fatalf("create: %s", body)
	}
	execd, headers := c.endpoint(quotaKeyA, id)
	stop := holdCode(t, execd, headers, "import time; time.sleep(30); open('/session/code-ran', 'w').write('x')")
	stop()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", execd+"/command", strings.NewReader(`{"command": "echo started; sleep 31; touch /session/command-ran"}`))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("command stream ended before its output: %v", err)
		}
		if strings.Contains(line, "started") {
			break
		}
	}
	cancel()
	resp.Body.Close()
	// The abandoned code would hold the session's turn for 30 s; the
	// command's sleep would stay among the sandbox's processes as long.
	look := `import os
def cmdline(p):
    try:
        return open('/proc/%s/cmdline' % p, 'rb').read()
    except OSError:
        return b''
sleeping = any(cmdline(p) == b'sleep\x0031\x00' for p in os.listdir('/proc') if p.isdigit())
print('code-ran=%s command-ran=%s sleeping=%s' % (os.path.exists('/session/code-ran'), os.path.exists('/session/command-ran'), sleeping))
`
	q, _ := json.Marshal(map[string]any{"code": look, "context": map[string]string{"language": "python"}})
	for deadline := time.Now().Add(20 * time.Second); ; {
		code, body := c.do(context.Background(), "", "POST", execd+"/code", headers, string(q))
		if code != 200 || !strings.Contains(body, "code-ran=False command-ran=False") {
			t.Fatalf("after their clients left: %d %s; want neither file", code, body)
		}
		if strings.Contains(body, "sleeping=False") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned command still runs: %s", body)
		}
	}
}
