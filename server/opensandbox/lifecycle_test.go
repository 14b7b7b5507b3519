package opensandbox_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/opensandbox"
	"github.com/agentbox/agentbox/session"
)

// TestLifecycle walks one sandbox through every route, as the SDK does:
// create (202), endpoints of execd and of the egress sidecar, get, pause
// (state kept), resume, renew, delete.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, nil)
	before := time.Now()
	sb := e.create(map[string]any{
		"image":          map[string]any{"uri": "python:3.11"},
		"entrypoint":     []string{"tail", "-f", "/dev/null"},
		"timeout":        600,
		"resourceLimits": map[string]string{"cpu": "500m", "memory": "128Mi"},
		"env":            map[string]string{"GREETING": "hello"},
		"metadata":       map[string]string{"project": "apollo"},
	})
	if sb.Status.State != opensandbox.StateRunning || sb.Metadata["project"] != "apollo" || sb.Image != nil {
		t.Errorf("create answered %+v: want Running, the metadata, no image", sb)
	}
	if sb.ExpiresAt == nil || sb.ExpiresAt.Sub(before) < 590*time.Second || sb.ExpiresAt.Sub(before) > 700*time.Second {
		t.Errorf("create: expiresAt %v, want about 600 s from %v", sb.ExpiresAt, before)
	}

	got := e.get(sb.ID)
	if got.Image == nil || got.Image.URI != e.cfg.SandboxImage {
		t.Errorf("get: image %+v, want the configured sandbox image %s (python:3.11 runs as it)", got.Image, e.cfg.SandboxImage)
	}
	if got.Status.State != opensandbox.StateRunning || strings.Join(got.Entrypoint, " ") != "tail -f /dev/null" || got.CreatedAt.IsZero() {
		t.Errorf("get: %+v", got)
	}
	res, err := e.exec(sb.ID, "import os\nx = 41 + 1\nprint(os.environ['GREETING'], x)")
	if err != nil || strings.TrimSpace(res.Stdout) != "hello 42" {
		t.Fatalf("exec in the sandbox: %v %+v", err, res)
	}

	for _, port := range []string{"44772", "18080", "8080"} {
		r := e.do("GET", "/v1/sandboxes/"+sb.ID+"/endpoints/"+port, nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("endpoint %s: %d %s", port, r.status, r.body)
		}
		var ep struct {
			Endpoint string            `json:"endpoint"`
			Headers  map[string]string `json:"headers"`
		}
		r.json(t, &ep)
		host := strings.TrimPrefix(e.srv.URL, "http://")
		if ep.Endpoint != host+"/execd/"+sb.ID {
			t.Errorf("endpoint %s: %q, want %s/execd/%s", port, ep.Endpoint, host, sb.ID)
		}
		tok := ep.Headers[opensandbox.TokenHeader]
		claims, err := e.tokens.Verify(tok, sb.ID)
		if err != nil {
			t.Errorf("endpoint %s: token does not verify: %v", port, err)
		}
		want, _ := e.keys.Lookup(keyA)
		if claims.Tenant != want {
			t.Errorf("endpoint %s: token of tenant %v, want %v", port, claims.Tenant, want)
		}
		if info, err := e.m.Info(context.Background(), want.SessionKey(sb.ID)); err != nil || !claims.Opens(info.ContainerID) {
			t.Errorf("endpoint %s: the token does not open the sandbox's container %q (%v)", port, info.ContainerID, err)
		}
		if _, err := e.tokens.Verify(tok, "another-sandbox"); err == nil {
			t.Errorf("endpoint %s: the token opens another sandbox", port)
		}
	}

	if r := e.do("POST", "/v1/sandboxes/"+sb.ID+"/pause", nil, nil); r.status != http.StatusAccepted {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if got := e.get(sb.ID); got.Status.State != opensandbox.StatePaused {
		t.Errorf("after pause: state %q", got.Status.State)
	}
	if _, err := e.exec(sb.ID, "x"); !errors.Is(err, session.ErrPaused) {
		t.Errorf("exec in a paused sandbox: %v, want ErrPaused", err)
	}
	if r := e.do("POST", "/v1/sandboxes/"+sb.ID+"/resume", nil, nil); r.status != http.StatusAccepted {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	if got := e.get(sb.ID); got.Status.State != opensandbox.StateRunning {
		t.Errorf("after resume: state %q", got.Status.State)
	}
	if res, err := e.exec(sb.ID, "print(x)"); err != nil || strings.TrimSpace(res.Stdout) != "42" || res.StateLost {
		t.Errorf("after pause and resume, x: %v %+v, want 42 (state kept)", err, res)
	}

	want := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	r := e.do("POST", "/v1/sandboxes/"+sb.ID+"/renew-expiration", map[string]string{"expiresAt": want.Format(time.RFC3339)}, nil)
	if r.status != http.StatusOK {
		t.Fatalf("renew: %d %s", r.status, r.body)
	}
	var renewed struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	r.json(t, &renewed)
	if d := renewed.ExpiresAt.Sub(want); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("renew: expiresAt %v, want %v", renewed.ExpiresAt, want)
	}
	if got := e.get(sb.ID); got.ExpiresAt == nil || got.ExpiresAt.Sub(want).Abs() > 2*time.Second {
		t.Errorf("get after renew: expiresAt %v, want %v", got.ExpiresAt, want)
	}

	if r := e.do("DELETE", "/v1/sandboxes/"+sb.ID, nil, nil); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete: %d %s, want 204 and no body", r.status, r.body)
	}
	if got := e.get(sb.ID); got.Status.State != opensandbox.StateTerminated {
		t.Errorf("get after delete: state %q, want Terminated", got.Status.State)
	}
	// get says Terminated: a second delete agrees (TestDeleteTwice).
	if r := e.do("DELETE", "/v1/sandboxes/"+sb.ID, nil, nil); r.status != http.StatusNoContent {
		t.Errorf("second delete: %d %s, want 204", r.status, r.body)
	}
	for _, rt := range []struct{ method, path string }{
		{"GET", "/v1/sandboxes/" + sb.ID + "/endpoints/44772"},
		{"POST", "/v1/sandboxes/" + sb.ID + "/pause"},
	} {
		r := e.do(rt.method, rt.path, nil, nil)
		if code, _ := r.apiError(t); r.status != http.StatusNotFound || code != "SANDBOX::SANDBOX_NOT_FOUND" {
			t.Errorf("%s %s after delete: %d %s, want 404", rt.method, rt.path, r.status, r.body)
		}
	}
}

// TestAuth: a missing or wrong key is 401; another tenant's sandbox is 404
// on every route, exactly like an unknown id, and absent from its list.
func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, nil)
	sb := e.create(map[string]any{"timeout": nil})

	for _, tt := range []struct {
		name string
		key  *string
		code string
	}{
		{"no key", nil, "MISSING_API_KEY"},
		{"empty key", ptr(""), "MISSING_API_KEY"},
		{"wrong key", ptr("not-a-key-0123456789abcdef"), "INVALID_API_KEY"},
	} {
		for _, path := range []string{"/v1/sandboxes", "/v1/sandboxes/" + sb.ID} {
			r := e.do("GET", path, nil, map[string]*string{opensandbox.APIKeyHeader: tt.key})
			if code, _ := r.apiError(t); r.status != http.StatusUnauthorized || code != tt.code {
				t.Errorf("%s, GET %s: %d %s, want 401 %s", tt.name, path, r.status, r.body, tt.code)
			}
		}
	}

	b := map[string]*string{opensandbox.APIKeyHeader: ptr(keyB)}
	for _, rt := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/sandboxes/" + sb.ID, nil},
		{"GET", "/v1/sandboxes/" + sb.ID + "/endpoints/44772", nil},
		{"POST", "/v1/sandboxes/" + sb.ID + "/pause", nil},
		{"POST", "/v1/sandboxes/" + sb.ID + "/resume", nil},
		{"POST", "/v1/sandboxes/" + sb.ID + "/renew-expiration", map[string]string{"expiresAt": time.Now().Add(time.Hour).Format(time.RFC3339)}},
		{"DELETE", "/v1/sandboxes/" + sb.ID, nil},
	} {
		other := e.do(rt.method, rt.path, rt.body, b)
		unknown := e.do(rt.method, strings.Replace(rt.path, sb.ID, "0123456789abcdef0123456789abcdef", 1), rt.body, nil)
		oc, om := other.apiError(t)
		uc, _ := unknown.apiError(t)
		if other.status != http.StatusNotFound || unknown.status != http.StatusNotFound || oc != uc {
			t.Errorf("%s %s by another tenant: %d %s; unknown id: %d %s; want both 404 alike",
				rt.method, rt.path, other.status, other.body, unknown.status, unknown.body)
		}
		if strings.Contains(om, "tenant") {
			t.Errorf("the 404 mentions tenants: %s", om)
		}
	}
	var list struct {
		Items []sandbox `json:"items"`
	}
	e.do("GET", "/v1/sandboxes", nil, b).json(t, &list)
	if len(list.Items) != 0 {
		t.Errorf("tenant B lists %d sandboxes, want none of A's", len(list.Items))
	}
	if got := e.get(sb.ID); got.Status.State != opensandbox.StateRunning {
		t.Errorf("A's sandbox after B's attempts: %q, want Running (untouched)", got.Status.State)
	}
}

// TestNoKeys: a server without keys serves everyone as one tenant.
func TestNoKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, nil)
	sb := e.create(nil)
	if got := e.get(sb.ID); got.ID != sb.ID || got.ExpiresAt != nil {
		t.Errorf("get: %+v, want the sandbox, no expiry (SESSION_TTL_S=0, timeout absent)", got)
	}
	r := e.do("GET", "/v1/sandboxes/"+sb.ID, nil, map[string]*string{opensandbox.APIKeyHeader: ptr("whatever-key-at-all")})
	if r.status != http.StatusOK {
		t.Errorf("with an unneeded key: %d %s", r.status, r.body)
	}
	if res, err := e.exec(sb.ID, "print(1)"); err != nil || strings.TrimSpace(res.Stdout) != "1" {
		t.Errorf("exec as tenant.Local: %v %+v", err, res)
	}
}

// TestTimeout: null means no expiry, a number that many seconds, absent the
// operator's default; the operator's maximum refuses the rest.
func TestTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(c *config.Config) {
		c.SessionTTL = 30 * time.Minute
		c.MaxSessionTTL = time.Hour
	})
	now := time.Now()
	def := e.create(map[string]any{})
	if def.ExpiresAt == nil || def.ExpiresAt.Sub(now) < 29*time.Minute || def.ExpiresAt.Sub(now) > 31*time.Minute {
		t.Errorf("absent timeout: expiresAt %v, want SESSION_TTL_S (30 min) from now", def.ExpiresAt)
	}
	short := e.create(map[string]any{"timeout": 120})
	if short.ExpiresAt == nil || short.ExpiresAt.Sub(now) < 110*time.Second || short.ExpiresAt.Sub(now) > 200*time.Second {
		t.Errorf("timeout 120: expiresAt %v", short.ExpiresAt)
	}
	for _, tt := range []struct {
		name string
		body string
		code string
		msg  string
	}{
		{"null with a maximum", `{"image": {"uri": "python:3.11"}, "timeout": null}`, "SANDBOX::ABOVE_MAXIMUM", "ttl"},
		{"above the maximum", `{"image": {"uri": "python:3.11"}, "timeout": 7200}`, "SANDBOX::ABOVE_MAXIMUM", "ttl"},
		{"memory above the maximum", `{"image": {"uri": "python:3.11"}, "resourceLimits": {"memory": "3Gi"}}`, "SANDBOX::ABOVE_MAXIMUM", "memory"}, // config.DefaultMaxMemoryMB is 2048
		{"cpus above the maximum", `{"image": {"uri": "python:3.11"}, "resourceLimits": {"cpu": "4"}}`, "SANDBOX::ABOVE_MAXIMUM", "cpus"},
	} {
		r := e.do("POST", "/v1/sandboxes", tt.body, nil)
		code, msg := r.apiError(t)
		if r.status != http.StatusBadRequest || code != tt.code || !strings.Contains(msg, tt.msg) {
			t.Errorf("%s: %d %s, want 400 %s naming %s", tt.name, r.status, r.body, tt.code, tt.msg)
		}
	}
	// Renewing past the maximum is refused too.
	r := e.do("POST", "/v1/sandboxes/"+short.ID+"/renew-expiration", map[string]string{"expiresAt": time.Now().Add(3 * time.Hour).Format(time.RFC3339)}, nil)
	if code, _ := r.apiError(t); r.status != http.StatusBadRequest || code != "SANDBOX::ABOVE_MAXIMUM" {
		t.Errorf("renew past the maximum: %d %s", r.status, r.body)
	}
}

// TestTimeoutNull: without a maximum, null is a sandbox that never
// expires, and a renewal gives it an expiry.
func TestTimeoutNull(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(c *config.Config) { c.SessionTTL = 30 * time.Minute })
	sb := e.create(map[string]any{"timeout": nil})
	if sb.ExpiresAt != nil {
		t.Errorf("timeout null: expiresAt %v, want none", sb.ExpiresAt)
	}
	if got := e.get(sb.ID); got.ExpiresAt != nil {
		t.Errorf("get: expiresAt %v, want none", got.ExpiresAt)
	}
	r := e.do("POST", "/v1/sandboxes/"+sb.ID+"/renew-expiration", `{"expiresAt": "`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)+`"}`, nil)
	if r.status != http.StatusOK {
		t.Fatalf("renew: %d %s", r.status, r.body)
	}
	if got := e.get(sb.ID); got.ExpiresAt == nil {
		t.Errorf("after renew: no expiry")
	}
}

// TestList filters by state and metadata and pages, newest first.
func TestList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, nil)
	var ids []string
	for i, team := range []string{"red", "blue", "red"} {
		sb := e.create(map[string]any{"metadata": map[string]string{"team": team, "n": string(rune('0' + i))}})
		ids = append(ids, sb.ID)
		time.Sleep(10 * time.Millisecond) // distinct creation times, for the order
	}
	if r := e.do("POST", "/v1/sandboxes/"+ids[0]+"/pause", nil, nil); r.status != http.StatusAccepted {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	type page struct {
		Items      []sandbox `json:"items"`
		Pagination struct {
			Page        int  `json:"page"`
			PageSize    int  `json:"pageSize"`
			TotalItems  int  `json:"totalItems"`
			TotalPages  int  `json:"totalPages"`
			HasNextPage bool `json:"hasNextPage"`
		} `json:"pagination"`
	}
	for _, tt := range []struct {
		name  string
		query string
		want  []string
		total int
		pages int
		next  bool
	}{
		{"all", "", []string{ids[2], ids[1], ids[0]}, 3, 1, false},
		{"running", "?state=Running", []string{ids[2], ids[1]}, 2, 1, false},
		{"paused, any case", "?state=paused", []string{ids[0]}, 1, 1, false},
		{"either state", "?state=Paused&state=Running", []string{ids[2], ids[1], ids[0]}, 3, 1, false},
		{"terminated", "?state=Terminated", nil, 0, 0, false},
		{"metadata", "?metadata=" + url.QueryEscape("team=red"), []string{ids[2], ids[0]}, 2, 1, false},
		{"two pairs", "?metadata=" + url.QueryEscape("team=red&n=2"), []string{ids[2]}, 1, 1, false},
		{"metadata and state", "?state=Running&metadata=" + url.QueryEscape("team=red"), []string{ids[2]}, 1, 1, false},
		{"no match", "?metadata=" + url.QueryEscape("team=green"), nil, 0, 0, false},
		{"first page", "?pageSize=2", []string{ids[2], ids[1]}, 3, 2, true},
		{"second page", "?pageSize=2&page=2", []string{ids[0]}, 3, 2, false},
		{"past the end", "?pageSize=2&page=5", nil, 3, 2, false},
	} {
		r := e.do("GET", "/v1/sandboxes"+tt.query, nil, nil)
		if r.status != http.StatusOK {
			t.Errorf("%s: %d %s", tt.name, r.status, r.body)
			continue
		}
		var p page
		r.json(t, &p)
		var got []string
		for _, it := range p.Items {
			got = append(got, it.ID)
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") || p.Pagination.TotalItems != tt.total ||
			p.Pagination.TotalPages != tt.pages || p.Pagination.HasNextPage != tt.next {
			t.Errorf("%s: items %v, pagination %+v; want %v, total %d, pages %d, next %v",
				tt.name, got, p.Pagination, tt.want, tt.total, tt.pages, tt.next)
		}
		if !strings.Contains(string(r.body), `"items":[`) {
			t.Errorf("%s: items must be an array, even empty: %s", tt.name, r.body)
		}
	}
}

// TestRequestID: a usable X-Request-ID is echoed, on errors too; a missing
// or unusable one is replaced by a fresh one.
func TestRequestID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, nil)
	for _, tt := range []struct {
		name string
		sent *string
		echo bool
	}{
		{"given", ptr("req-1234-abcd"), true},
		{"absent", nil, false},
		{"unusable", ptr("has spaces\tand tabs"), false},
	} {
		for _, key := range []*string{ptr(keyA), nil} { // a 200 and a 401
			r := e.do("GET", "/v1/sandboxes", nil, map[string]*string{opensandbox.RequestIDHeader: tt.sent, opensandbox.APIKeyHeader: key})
			got := r.header.Get(opensandbox.RequestIDHeader)
			if tt.echo && got != *tt.sent {
				t.Errorf("%s (status %d): X-Request-ID %q, want it echoed", tt.name, r.status, got)
			}
			if !tt.echo && (len(got) != 32 || (tt.sent != nil && got == *tt.sent)) {
				t.Errorf("%s (status %d): X-Request-ID %q, want a fresh 32-digit one", tt.name, r.status, got)
			}
		}
	}
	a := e.do("GET", "/v1/sandboxes", nil, nil).header.Get(opensandbox.RequestIDHeader)
	b := e.do("GET", "/v1/sandboxes", nil, nil).header.Get(opensandbox.RequestIDHeader)
	if a == b {
		t.Errorf("two requests got the same generated id %q", a)
	}
}
