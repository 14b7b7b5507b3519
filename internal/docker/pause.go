package docker

import (
	"context"
	"fmt"
)

// PauseContainer freezes every process of a running container (the cgroup
// freezer); its memory stays. ErrConflict if it is not running or already
// paused.
func (c *Client) PauseContainer(ctx context.Context, id string) error {
	if err := c.api.ContainerPause(ctx, id); err != nil {
		return fmt.Errorf("pause container %s: %w", short(id), c.classify(err))
	}
	return nil
}

// UnpauseContainer thaws a paused container. ErrConflict if it is not
// paused.
func (c *Client) UnpauseContainer(ctx context.Context, id string) error {
	if err := c.api.ContainerUnpause(ctx, id); err != nil {
		return fmt.Errorf("unpause container %s: %w", short(id), c.classify(err))
	}
	return nil
}
