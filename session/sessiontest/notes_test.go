package sessiontest_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestConfigNotesLogged: what loading made of LangGraph-Sandbox's settings
// (config.Config.Notes) reaches the operator through the Manager's log
// (issue 24 row 7).
func TestConfigNotesLogged(t *testing.T) {
	d := sessiontest.NewDriver()
	var buf bytes.Buffer
	cfg := testConfig(t, func(c *config.Config) {
		c.Notes = []string{"COMPOSE_NETWORK=langgraph-network is LangGraph-Sandbox's and not needed"}
	})
	startManager(t, d, cfg, session.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if !strings.Contains(buf.String(), "COMPOSE_NETWORK=langgraph-network") || !strings.Contains(buf.String(), "level=WARN") {
		t.Fatalf("log does not carry the note at Warn:\n%s", buf.String())
	}
}
