package opensandbox_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/server/opensandbox"
)

// TestBadInput: every malformed request gets an OpenSandbox-shaped error
// with the right status and a message that says what is wrong, and starts
// no sandbox.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, nil)
	sb := e.create(nil)
	id := sb.ID
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	huge := `{"metadata": {"a": "` + strings.Repeat("x", 70<<10) + `"}}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code, msg                string
	}{
		{"malformed JSON", "POST", "/v1/sandboxes", `{"timeout": `, 400, "SANDBOX::INVALID_REQUEST", "malformed JSON"},
		{"not an object", "POST", "/v1/sandboxes", `[1, 2]`, 400, "SANDBOX::INVALID_REQUEST", "want a JSON object"},
		{"empty body", "POST", "/v1/sandboxes", ``, 400, "SANDBOX::INVALID_REQUEST", "JSON object is required"},
		{"trailing data", "POST", "/v1/sandboxes", `{} {}`, 400, "SANDBOX::INVALID_REQUEST", "after the JSON value"},
		{"env not strings", "POST", "/v1/sandboxes", `{"env": {"A": 1}}`, 400, "SANDBOX::INVALID_REQUEST", "field env: want a string"},
		{"unknown image field", "POST", "/v1/sandboxes", `{"image": {"uri": "x", "tag": "y"}}`, 400, "SANDBOX::INVALID_REQUEST", `unknown field "tag"`},
		{"image without uri", "POST", "/v1/sandboxes", `{"image": {}}`, 400, "SANDBOX::INVALID_PARAMETER", "image.uri is required"},
		{"timeout too short", "POST", "/v1/sandboxes", `{"timeout": 30}`, 400, "SANDBOX::INVALID_PARAMETER", "at least 60"},
		{"timeout a string", "POST", "/v1/sandboxes", `{"timeout": "600"}`, 400, "SANDBOX::INVALID_PARAMETER", "whole seconds"},
		{"timeout a fraction", "POST", "/v1/sandboxes", `{"timeout": 60.5}`, 400, "SANDBOX::INVALID_PARAMETER", "whole seconds"},
		{"timeout huge", "POST", "/v1/sandboxes", `{"timeout": 99999999999999999999}`, 400, "SANDBOX::INVALID_PARAMETER", "timeout"},
		{"snapshot", "POST", "/v1/sandboxes", `{"snapshotId": "snap_1"}`, 400, "SANDBOX::INVALID_PARAMETER", "no snapshots"},
		{"entrypoint", "POST", "/v1/sandboxes", `{"entrypoint": ["python", "/app/main.py"]}`, 400, "SANDBOX::INVALID_PARAMETER", "idle entrypoint"},
		{"empty entrypoint", "POST", "/v1/sandboxes", `{"entrypoint": []}`, 400, "SANDBOX::INVALID_PARAMETER", "at least one"},
		{"unknown resource", "POST", "/v1/sandboxes", `{"resourceLimits": {"disk": "1Gi"}}`, 400, "SANDBOX::INVALID_PARAMETER", "unknown resource"},
		{"bad cpu", "POST", "/v1/sandboxes", `{"resourceLimits": {"cpu": "lots"}}`, 400, "SANDBOX::INVALID_PARAMETER", "millicores"},
		{"zero cpu", "POST", "/v1/sandboxes", `{"resourceLimits": {"cpu": "0m"}}`, 400, "SANDBOX::INVALID_PARAMETER", "resourceLimits.cpu"},
		{"bad memory", "POST", "/v1/sandboxes", `{"resourceLimits": {"memory": "12Qi"}}`, 400, "SANDBOX::INVALID_PARAMETER", "512Mi"},
		{"memory below the minimum", "POST", "/v1/sandboxes", `{"image": {"uri": "python:3.11"}, "resourceLimits": {"memory": "16Mi"}}`, 400, "SANDBOX::INVALID_PARAMETER", "memory"},
		{"gpu", "POST", "/v1/sandboxes", `{"resourceLimits": {"gpu": "1"}}`, 400, "SANDBOX::INVALID_PARAMETER", "no GPUs"},
		{"network policy", "POST", "/v1/sandboxes", `{"networkPolicy": {"defaultAction": "deny"}}`, 400, "SANDBOX::INVALID_PARAMETER", "SANDBOX_NETWORK"},
		{"volumes", "POST", "/v1/sandboxes", `{"volumes": [{"name": "v", "mountPath": "/v"}]}`, 400, "SANDBOX::INVALID_PARAMETER", "volumes"},
		{"platform", "POST", "/v1/sandboxes", `{"platform": {"os": "windows", "arch": "amd64"}}`, 400, "SANDBOX::INVALID_PARAMETER", "linux"},
		{"reserved metadata", "POST", "/v1/sandboxes", `{"metadata": {"opensandbox.io/id": "x"}}`, 400, "SANDBOX::INVALID_PARAMETER", "reserved"},
		{"bad metadata key", "POST", "/v1/sandboxes", `{"image": {"uri": "python:3.11"}, "metadata": {"a b": "x"}}`, 400, "SANDBOX::INVALID_PARAMETER", "labels"},
		{"reserved env", "POST", "/v1/sandboxes", `{"image": {"uri": "python:3.11"}, "env": {"LD_PRELOAD": "/x.so"}}`, 400, "SANDBOX::INVALID_PARAMETER", "LD_PRELOAD"},
		{"renew on access", "POST", "/v1/sandboxes", `{"extensions": {"access.renew.extend.seconds": "600"}}`, 400, "SANDBOX::INVALID_PARAMETER", "renew on access"},
		{"huge body", "POST", "/v1/sandboxes", huge, 413, "SANDBOX::REQUEST_TOO_LARGE", "64 KiB"},
		{"bad id", "GET", "/v1/sandboxes/a.b", "", 400, "SANDBOX::INVALID_PARAMETER", "invalid sandbox id"},
		{"escaped slash id", "GET", "/v1/sandboxes/" + url.PathEscape("a/b"), "", 400, "SANDBOX::INVALID_PARAMETER", "invalid sandbox id"},
		{"unknown id", "GET", "/v1/sandboxes/0123456789abcdef", "", 404, "SANDBOX::SANDBOX_NOT_FOUND", "0123456789abcdef"},
		{"port zero", "GET", "/v1/sandboxes/" + id + "/endpoints/0", "", 400, "SANDBOX::INVALID_PARAMETER", "1 to 65535"},
		{"port too big", "GET", "/v1/sandboxes/" + id + "/endpoints/70000", "", 400, "SANDBOX::INVALID_PARAMETER", "1 to 65535"},
		{"port not a number", "GET", "/v1/sandboxes/" + id + "/endpoints/http", "", 400, "SANDBOX::INVALID_PARAMETER", "1 to 65535"},
		{"renew bad time", "POST", "/v1/sandboxes/" + id + "/renew-expiration", `{"expiresAt": "tomorrow"}`, 400, "SANDBOX::INVALID_EXPIRATION", "RFC 3339"},
		{"renew in the past", "POST", "/v1/sandboxes/" + id + "/renew-expiration", `{"expiresAt": "2001-01-01T00:00:00Z"}`, 400, "SANDBOX::INVALID_EXPIRATION", "not in the future"},
		{"renew without expiresAt", "POST", "/v1/sandboxes/" + id + "/renew-expiration", `{}`, 400, "SANDBOX::INVALID_EXPIRATION", "required"},
		{"renew unknown field", "POST", "/v1/sandboxes/" + id + "/renew-expiration", `{"expiresAt": "` + future + `", "x": 1}`, 400, "SANDBOX::INVALID_REQUEST", `unknown field "x"`},
		{"renew no body", "POST", "/v1/sandboxes/" + id + "/renew-expiration", ``, 400, "SANDBOX::INVALID_REQUEST", "required"},
		{"page zero", "GET", "/v1/sandboxes?page=0", "", 400, "SANDBOX::INVALID_PARAMETER", "page"},
		{"page size too big", "GET", "/v1/sandboxes?pageSize=5000", "", 400, "SANDBOX::INVALID_PARAMETER", "1 to 1000"},
		{"bad metadata filter", "GET", "/v1/sandboxes?metadata=" + url.QueryEscape("a=%zz"), "", 400, "SANDBOX::INVALID_PARAMETER", "key=value"},
		{"wrong method", "PUT", "/v1/sandboxes/" + id, "", 405, "SANDBOX::METHOD_NOT_ALLOWED", "PUT"},
		{"wrong method on pause", "GET", "/v1/sandboxes/" + id + "/pause", "", 405, "SANDBOX::METHOD_NOT_ALLOWED", "GET"},
		{"snapshots", "GET", "/v1/snapshots", "", 501, "SANDBOX::API_NOT_SUPPORTED", "snapshots"},
		{"metadata patch", "PATCH", "/v1/sandboxes/" + id + "/metadata", `{}`, 501, "SANDBOX::API_NOT_SUPPORTED", "metadata"},
		{"unknown route", "GET", "/v1/sandboxes/" + id + "/logs", "", 404, "SANDBOX::NOT_FOUND", "no such route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.body != "" {
				body = tt.body
			}
			r := e.do(tt.method, tt.path, body, nil)
			code, msg := r.apiError(t)
			if r.status != tt.status || code != tt.code || !strings.Contains(msg, tt.msg) {
				t.Errorf("%d %s, want %d %s with a message naming %q", r.status, r.body, tt.status, tt.code, tt.msg)
			}
		})
	}

	// A body over the cap without a Content-Length (chunked) is cut off
	// while it is read: 413 as well.
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/sandboxes", io.MultiReader(strings.NewReader(huge[:10]), bytes.NewReader([]byte(huge[10:]))))
	req.Header.Set(opensandbox.APIKeyHeader, keyA)
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(data), "REQUEST_TOO_LARGE") {
		t.Errorf("chunked huge body: %d %s, want 413", resp.StatusCode, data)
	}

	// Only the one sandbox exists: no bad request started one.
	var list struct {
		Items []sandbox `json:"items"`
	}
	e.do("GET", "/v1/sandboxes", nil, nil).json(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != id {
		t.Errorf("after the bad requests, %d sandboxes: %+v", len(list.Items), list.Items)
	}
}
