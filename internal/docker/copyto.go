package docker

import (
	"context"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/container"
)

// CopyTo unpacks the tar stream into dir in container id, as `docker cp`
// writes it: the engine's own copy, which the benchmarks of the files API
// take as their floor. The engine writes into the container's root
// filesystem layer; it cannot reach a tmpfs mounted inside the container.
func (c *Client) CopyTo(ctx context.Context, id, dir string, tarStream io.Reader) error {
	err := c.api.CopyToContainer(ctx, id, dir, tarStream, container.CopyToContainerOptions{})
	if err != nil {
		return fmt.Errorf("copy into %s in container %s: %w", dir, short(id), c.classify(err))
	}
	return nil
}
