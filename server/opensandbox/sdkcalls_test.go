package opensandbox_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestCreateNeedsImage: OpenSandbox's spec requires image (snapshots
// aside, which agentbox has not): a create without one is refused with a
// 400 naming the field, not run as the default image.
func TestCreateNeedsImage(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t, sessiontest.NewDriver())
	for _, body := range []string{`{}`, `{"image": null, "timeout": 600}`, `{"resourceLimits": {"cpu": "1", "memory": "512Mi"}}`} {
		r := e.do("POST", "/v1/sandboxes", body, nil)
		code, msg := r.apiError(t)
		if r.status != http.StatusBadRequest || code != "SANDBOX::INVALID_PARAMETER" || !strings.Contains(msg, "image") {
			t.Errorf("create %s: %d %s, want 400 SANDBOX::INVALID_PARAMETER naming image", body, r.status, r.body)
		}
	}
	e.create(map[string]any{"image": map[string]any{"uri": "python:3.11"}})
}

// TestDeleteTwice: a deleted sandbox is Terminated (get_info says so), and
// deleting it again answers 204 as the first time did: the SDK's kill,
// retried, does not fail on a sandbox get_info still describes. A sandbox
// that never was is 404.
func TestDeleteTwice(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t, sessiontest.NewDriver())
	sb := e.create(nil)
	for i := range 2 {
		if r := e.do("DELETE", "/v1/sandboxes/"+sb.ID, nil, nil); r.status != http.StatusNoContent {
			t.Fatalf("delete %d: %d %s, want 204", i+1, r.status, r.body)
		}
		if got := e.get(sb.ID); got.Status.State != "Terminated" {
			t.Fatalf("after delete %d: state %q, want Terminated", i+1, got.Status.State)
		}
	}
	r := e.do("DELETE", "/v1/sandboxes/never-was", nil, nil)
	if code, _ := r.apiError(t); r.status != http.StatusNotFound || code != "SANDBOX::SANDBOX_NOT_FOUND" {
		t.Errorf("delete of an unknown id: %d %s, want 404", r.status, r.body)
	}
}

// TestPatchMetadataNotSupported: metadata is fixed at create (container
// labels): the SDK's patch_metadata answers 501 with a body naming the
// call and why, as the README's list of what is not offered says.
func TestPatchMetadataNotSupported(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t, sessiontest.NewDriver())
	sb := e.create(map[string]any{"metadata": map[string]string{"team": "a"}})
	r := e.do("PATCH", "/v1/sandboxes/"+sb.ID+"/metadata", map[string]any{"team": "b"}, nil)
	code, msg := r.apiError(t)
	if r.status != http.StatusNotImplemented || code != "SANDBOX::API_NOT_SUPPORTED" {
		t.Fatalf("patch metadata: %d %s, want 501 SANDBOX::API_NOT_SUPPORTED", r.status, r.body)
	}
	for _, want := range []string{"PATCH /v1/sandboxes/" + sb.ID + "/metadata", "patch_metadata", "fixed at create"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
	if got := e.get(sb.ID); got.Metadata["team"] != "a" {
		t.Errorf("metadata after the refused patch: %v", got.Metadata)
	}
}
