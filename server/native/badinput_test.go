package native_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/server/native"
	"github.com/agentbox/agentbox/server/tenant"
)

// TestBadInput: input refused before it reaches the Manager, each with its
// status and code in the API's error shape. The handler has no Manager at
// all: a request that reached it would panic, so each of these is refused
// by the handler's own checks.
func TestBadInput(t *testing.T) {
	srv := httptest.NewServer(native.NewHandler(nil, native.Options{MaxBodyBytes: 1024, Keys: tenant.NewKeys([]string{"k"})}))
	defer srv.Close()
	const p = "/v1/agentbox/sessions/s1"
	sse := map[string]string{"Accept": "text/event-stream"}
	cases := []struct {
		name   string
		r      req
		status int
		code   string
	}{
		{"malformed JSON", req{method: "POST", path: p + "/executions", body: `{"code": `}, 400, "invalid_json"},
		{"not an object", req{method: "POST", path: p + "/executions", body: `["print(1)"]`}, 400, "invalid_json"},
		{"two values", req{method: "POST", path: p + "/executions", body: `{"code": "1"} {"code": "2"}`}, 400, "invalid_json"},
		{"unknown field", req{method: "POST", path: p + "/executions", body: `{"code": "1", "cod": "2"}`}, 400, "invalid_json"},
		{"wrong type", req{method: "POST", path: p + "/executions", body: `{"code": 1}`}, 400, "invalid_json"},
		{"empty body", req{method: "POST", path: p + "/executions"}, 400, "invalid_json"},
		{"no code", req{method: "POST", path: p + "/executions", body: `{"id": "x"}`}, 400, "invalid_code"},
		{"id with a slash", req{method: "POST", path: p + "/executions", body: `{"code": "1", "id": "a/b"}`}, 400, "invalid_id"},
		{"id too long", req{method: "POST", path: p + "/executions", body: `{"code": "1", "id": "` + strings.Repeat("a", 129) + `"}`}, 400, "invalid_id"},
		{"negative timeout", req{method: "POST", path: p + "/executions", body: `{"code": "1", "timeout_s": -1}`}, 400, "invalid_timeout"},
		{"zero timeout", req{method: "POST", path: p + "/executions", body: `{"code": "1", "timeout_s": 0}`}, 400, "invalid_timeout"},
		{"timeout over the cap", req{method: "POST", path: p + "/executions", body: `{"code": "1", "timeout_s": 3601}`}, 400, "invalid_timeout"},
		{"huge body", req{method: "POST", path: p + "/executions", body: `{"code": "` + strings.Repeat("x", 2048) + `"}`}, 413, "body_too_large"},
		{"huge select body", req{method: "POST", path: p + "/datasets/d/select", body: `{"refresh": ` + strings.Repeat(" ", 2048) + `true}`}, 413, "body_too_large"},
		{"bad select body", req{method: "POST", path: p + "/datasets/d/select", body: `{"refresh": "yes"}`}, 400, "invalid_json"},
		{"not JSON", req{method: "POST", path: p + "/executions", body: `code=1`, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, "unsupported_media_type"},
		{"bad Last-Event-ID", req{method: "POST", path: p + "/executions", body: `{"code": "1"}`, header: map[string]string{"Accept": "text/event-stream", "Last-Event-ID": "nope"}}, 400, "invalid_last_event_id"},
		{"bad execution id in path", req{method: "GET", path: p + "/executions/a%20b"}, 400, "invalid_id"},
		{"session name too long", req{method: "GET", path: "/v1/agentbox/sessions/" + strings.Repeat("n", 1025)}, 400, "invalid_session"},
		{"unknown route", req{method: "GET", path: "/v1/agentbox/nothing"}, 404, "not_found"},
		{"unknown sub-route", req{method: "GET", path: p + "/files"}, 404, "not_found"},
		{"wrong method", req{method: "PUT", path: p}, 405, "method_not_allowed"},
		{"wrong method on executions", req{method: "GET", path: p + "/executions", header: sse}, 405, "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.r.key = "k"
			resp, b := doURL(t, srv.URL, c.r)
			expectError(t, resp, b, c.status, c.code)
			if resp.Header.Get("X-Request-ID") == "" {
				t.Error("no X-Request-ID")
			}
		})
	}
	t.Run("wrong method lists the allowed ones", func(t *testing.T) {
		resp, _ := doURL(t, srv.URL, req{method: "PUT", path: p, key: "k"})
		if allow := resp.Header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "DELETE") {
			t.Fatalf("Allow %q", allow)
		}
	})
	t.Run("request id", func(t *testing.T) {
		for _, c := range []struct{ sent, echoed string }{
			{"abc-123", "abc-123"},
			{"has space", ""},
			{strings.Repeat("r", 129), ""},
		} {
			resp, _ := doURL(t, srv.URL, req{method: "GET", path: "/v1/agentbox/nothing", header: map[string]string{"X-Request-ID": c.sent}})
			got := resp.Header.Get("X-Request-ID")
			if c.echoed != "" && got != c.echoed || c.echoed == "" && (got == "" || got == c.sent) {
				t.Errorf("sent X-Request-ID %.20q, got back %.20q", c.sent, got)
			}
		}
	})
	t.Run("bad input is checked after the key", func(t *testing.T) {
		resp, b := doURL(t, srv.URL, req{method: "POST", path: p + "/executions", body: `{`})
		expectError(t, resp, b, http.StatusUnauthorized, "unauthorized")
	})
}
