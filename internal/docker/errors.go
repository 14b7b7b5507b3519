package docker

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound means the image or container does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a name is already taken (or the object is in a state
	// that forbids the operation).
	ErrConflict = errors.New("conflict")
	// ErrUnreachable means no Docker engine answered.
	ErrUnreachable = errors.New("docker engine unreachable")
	// ErrStart means the engine created a container but its runtime could
	// not start its first process (a setting the host cannot grant, say).
	ErrStart = errors.New("container could not start")
)

// UnreachableError says which engine could not be reached and how to fix it.
type UnreachableError struct {
	Host string // DOCKER_HOST or the default socket
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("no Docker engine answers at %s: start it (sudo systemctl start docker, or sudo service docker start, or dockerd &) or point DOCKER_HOST at one", e.Host)
}

func (e *UnreachableError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }
