package opensandbox_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// sdkDefaultCreate is the body OpenSandbox's Python SDK sends for
// Sandbox.create("python:3.11", connection_config=cfg) with nothing else
// set: a 10-minute timeout, its default resource {"cpu": "1", "memory":
// "2Gi"} and an idle entrypoint.
const sdkDefaultCreate = `{"image": {"uri": "python:3.11"}, "timeout": 600, "resourceLimits": {"cpu": "1", "memory": "2Gi"}, "entrypoint": ["tail", "-f", "/dev/null"], "secureAccess": false}`

// TestSDKDefaultCreateServed: the SDK's default create is served with
// the default settings, with the memory it asked for (issue 24 row 1);
// above an operator's explicit SANDBOX_MAX_MEMORY_MB it is refused,
// naming the setting.
func TestSDKDefaultCreateServed(t *testing.T) {
	e := newFakeEnvConfig(t, sessiontest.NewDriver(), nil)
	r := e.do("POST", "/v1/sandboxes", sdkDefaultCreate, nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("SDK default create: status %d %s, want 202", r.status, r.body)
	}
	var sb sandbox
	r.json(t, &sb)
	info, err := e.m.Info(context.Background(), e.sessionKey(sb.ID))
	if err != nil {
		t.Fatal(err)
	}
	if info.Limits == nil || info.Limits.MemoryMB != 2048 || info.Limits.CPUs != 1 {
		t.Fatalf("limits %+v, want 2048 MiB and 1 CPU as asked", info.Limits)
	}

	strict := newFakeEnvConfig(t, sessiontest.NewDriver(), func(c *config.Config) { c.MaxMemoryMB = 1024 })
	r = strict.do("POST", "/v1/sandboxes", sdkDefaultCreate, nil)
	if r.status != http.StatusBadRequest {
		t.Fatalf("above an explicit maximum: status %d %s, want 400", r.status, r.body)
	}
	if _, msg := r.apiError(t); !strings.Contains(msg, "SANDBOX_MAX_MEMORY_MB") || !strings.Contains(msg, "1024") {
		t.Errorf("refusal %q does not name SANDBOX_MAX_MEMORY_MB and its value", msg)
	}
}
