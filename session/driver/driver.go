// Package driver is the seam between a session.Manager and a container
// engine, as database/sql/driver is for database/sql: the Driver interface
// is what every engine must do, the small optional interfaces beside it
// are what an engine may also do (the Manager finds them by type
// assertion and says errors.ErrUnsupported, or takes a slower road,
// without them), and the sentinel errors are how an engine reports what
// the Manager acts on. Package session re-exports all of it under its old
// names; package drivertest checks an engine against the contract.
//
// The Docker engine's driver is internal/docker's; session/sessiontest
// holds an in-memory one for tests.
package driver

import (
	"context"
	"io"
	"time"
)

// Driver is what the Manager needs from a container engine. The Docker
// driver is the default; another engine is one new implementation.
//
// Errors: a container that does not exist is ErrContainerNotFound, a taken
// name ErrNameInUse, a missing image ErrImageMissing, an unreachable engine
// ErrUnavailable (each may be wrapped).
type Driver interface {
	// Image describes an image by reference.
	Image(ctx context.Context, ref string) (Image, error)
	// Create creates and starts a container. A container that was created
	// but did not start is removed before the error returns.
	Create(ctx context.Context, spec Spec) (id string, err error)
	// Connect starts the kernel bridge in a running container and returns
	// the byte stream joined to it.
	Connect(ctx context.Context, id string) (io.ReadWriteCloser, error)
	// Inspect describes a container by id or name.
	Inspect(ctx context.Context, idOrName string) (Container, error)
	// List returns the containers carrying every label in labels, running
	// or not.
	List(ctx context.Context, labels map[string]string) ([]Container, error)
	// Rename renames a container.
	Rename(ctx context.Context, id, name string) error
	// Remove kills and removes a container; one already gone is no error.
	Remove(ctx context.Context, id string) error
}

// Image is a sandbox image as a Driver describes it.
type Image struct {
	ID     string
	Labels map[string]string
}

// Mount is a host folder mounted into a container.
type Mount struct {
	Source   string // absolute host path
	Target   string // path in the container
	ReadOnly bool
}

// Spec is a container to create. Every security setting is explicit, so a
// Driver has nothing to choose.
type Spec struct {
	Name            string
	Image           string
	Env             []string
	User            string // of the container's first process (the init)
	WorkingDir      string // "" = the image's
	Labels          map[string]string
	Network         string            // "none", "bridge", ...
	ReadOnlyRoot    bool              // read-only root filesystem
	Tmpfs           map[string]string // path -> mount options
	Mounts          []Mount
	MemoryBytes     int64 // 0 = unlimited
	NoSwap          bool  // swap limited to nothing beyond MemoryBytes
	ShmBytes        int64 // size of /dev/shm; 0 = the engine's default
	OomScoreAdj     int   // of the init; -1000: never the kernel's OOM killer's victim (children inherit it)
	NanoCPUs        int64 // 1e9 = one core
	PidsLimit       int64
	CapDropAll      bool
	CapAdd          []string // given back after CapDropAll
	NoNewPrivileges bool
	Seccomp         string // profile JSON; "" = the engine's default, "unconfined" = none
	Runtime         string // OCI runtime name; "" = the engine's default
}

// Container is a container as a Driver describes it.
type Container struct {
	ID        string
	Name      string
	Image     string // image ID
	Labels    map[string]string
	Running   bool   // also while paused
	Paused    bool   // frozen (Manager.Pause)
	Status    string // "running", "paused", "exited", ...
	ExitCode  int
	OOMKilled bool
	Pid       int // of its first process on the engine's host (Inspect only); 0 if unknown
	Created   time.Time
}
