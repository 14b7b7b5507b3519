package docker_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session/driver"
	"github.com/agentbox/agentbox/session/driver/drivertest"
)

// TestDriverConformance runs the Driver contract against the Docker
// engine (session/sessiontest runs it against the in-memory driver).
func TestDriverConformance(t *testing.T) {
	t.Parallel()
	dockertest.Engine(t)
	image := dockertest.Image(t)
	drivertest.Run(t, drivertest.Config{
		Image:  image,
		Labels: map[string]string{dockertest.LabelTest: t.Name()},
	}, func(t *testing.T) driver.Driver {
		d, closer, err := docker.NewDriver()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closer.Close() })
		return d
	})
}
