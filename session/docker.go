package session

import (
	"io"

	"github.com/agentbox/agentbox/internal/docker"
)

// NewDockerDriver returns the Docker Driver (internal/docker's), reaching
// the engine the way the docker command does (DOCKER_HOST and friends).
// Close it when done.
func NewDockerDriver() (Driver, io.Closer, error) {
	d, closer, err := docker.NewDriver()
	if err != nil {
		return nil, nil, err
	}
	return d, closer, nil
}
