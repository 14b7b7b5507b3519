package sessiontest_test

import (
	"testing"

	"github.com/agentbox/agentbox/session/driver"
	"github.com/agentbox/agentbox/session/driver/drivertest"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestDriverConformance runs the Driver contract against the in-memory
// driver, so that the fake tests rely on cannot drift from the engine
// (internal/docker runs the same suite against Docker).
func TestDriverConformance(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, drivertest.Config{Image: sessiontest.SandboxImage}, func(t *testing.T) driver.Driver {
		return sessiontest.NewDriver()
	})
}
