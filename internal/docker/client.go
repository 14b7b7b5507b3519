package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
)

// Client talks to one Docker engine. It is safe for concurrent use.
type Client struct {
	api  *client.Client
	host string
}

// New returns a client configured from the environment (DOCKER_HOST,
// DOCKER_CERT_PATH, ...), negotiating the API version with the engine on first
// use. It does no I/O.
func New() (*Client, error) {
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = client.DefaultDockerHost
	}
	return &Client{api: api, host: host}, nil
}

// Close releases the client's connections.
func (c *Client) Close() error { return c.api.Close() }

// Host is the engine address the client uses.
func (c *Client) Host() string { return c.host }

// EngineInfo is what the engine says of itself.
type EngineInfo struct {
	ServerVersion   string
	APIVersion      string
	OS              string
	Architecture    string
	StorageDriver   string
	CgroupVersion   string
	CgroupDriver    string
	DefaultRuntime  string
	Runtimes        []string
	SecurityOptions []string
	MemTotal        int64
	NCPU            int
	MemoryLimit     bool // the engine can limit memory
	SwapLimit       bool // ... and swap
	PidsLimit       bool // ... and the number of processes
}

// Info pings the engine and reports its version and capabilities.
func (c *Client) Info(ctx context.Context) (EngineInfo, error) {
	if _, err := c.api.Ping(ctx); err != nil {
		return EngineInfo{}, c.classify(err)
	}
	info, err := c.api.Info(ctx)
	if err != nil {
		return EngineInfo{}, c.classify(err)
	}
	out := EngineInfo{
		ServerVersion:   info.ServerVersion,
		APIVersion:      c.api.ClientVersion(),
		OS:              info.OperatingSystem,
		Architecture:    info.Architecture,
		StorageDriver:   info.Driver,
		CgroupVersion:   info.CgroupVersion,
		CgroupDriver:    info.CgroupDriver,
		DefaultRuntime:  info.DefaultRuntime,
		SecurityOptions: info.SecurityOptions,
		MemTotal:        info.MemTotal,
		NCPU:            info.NCPU,
		MemoryLimit:     info.MemoryLimit,
		SwapLimit:       info.SwapLimit,
		PidsLimit:       info.PidsLimit,
	}
	for name := range info.Runtimes {
		out.Runtimes = append(out.Runtimes, name)
	}
	sort.Strings(out.Runtimes)
	return out, nil
}

// classify maps SDK errors onto this package's sentinels, by type.
func (c *Client) classify(err error) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err):
		return &UnreachableError{Host: c.host, Err: err}
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return err
}
