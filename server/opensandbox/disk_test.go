package opensandbox_test

import (
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
)

// TestNoSpaceIs507: creating a sandbox the host's disk has no room for
// (its BIND disk would eat into DISK_RESERVE_MB) answers 507 Insufficient
// Storage with a message naming what is full and the setting, not 500.
func TestNoSpaceIs507(t *testing.T) {
	e := newEnv(t, false, func(c *config.Config) {
		c.SessionStorage = config.StorageBind
		c.SessionDiskMB = 64
		c.DiskReserveMB = math.MaxInt32
	})
	r := e.do("POST", "/v1/sandboxes", map[string]any{"image": map[string]any{"uri": "python:3.11"}}, nil)
	if r.status != http.StatusInsufficientStorage {
		t.Fatalf("create with no room: status %d %s, want 507", r.status, r.body)
	}
	code, msg := r.apiError(t)
	if code != "SANDBOX::INSUFFICIENT_STORAGE" || !strings.Contains(msg, "DISK_RESERVE_MB") || strings.Contains(msg, e.cfg.SessionsRoot) {
		t.Fatalf("507 body %s %q: want the setting named, no host path", code, msg)
	}
}
