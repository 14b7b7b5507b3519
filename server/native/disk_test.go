package native_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
)

// TestNoSpaceIs507: a session the host's disk has no room for (its BIND
// disk would eat into DISK_RESERVE_MB) answers 507 Insufficient Storage
// with a message naming what is full and the setting, not 500.
func TestNoSpaceIs507(t *testing.T) {
	e := newEnv(t, nil, func(c *config.Config) {
		c.SessionStorage = config.StorageBind
		c.SessionDiskMB = 64
		c.DiskReserveMB = math.MaxInt32
	})
	resp, b := e.do(t, req{method: "POST", path: sess + "full/executions", body: execBody("pass", "")})
	expectError(t, resp, b, http.StatusInsufficientStorage, "no_space")
	var body struct{ Message string }
	_ = json.Unmarshal(b, &body)
	if !strings.Contains(body.Message, "DISK_RESERVE_MB") || strings.Contains(body.Message, "/sessions") {
		t.Fatalf("507 message %q: want the setting named, no host path", body.Message)
	}
}
