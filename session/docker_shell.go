package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/internal/docker"
)

// StreamCommand starts cmd in container id as user, joined to a stream.
func (d dockerDriver) StreamCommand(ctx context.Context, id, user string, cmd []string) (CommandStream, error) {
	s, err := d.cli.Exec(ctx, id, user, cmd)
	if errors.Is(err, docker.ErrConflict) {
		// The engine's answer for a container that is not running.
		return nil, fmt.Errorf("exec in container %s: not running: %w", shortID(id), err)
	}
	if err != nil {
		return nil, classify(err)
	}
	return s, nil
}
