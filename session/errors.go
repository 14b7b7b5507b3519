package session

import (
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session/driver"
)

var (
	// ErrClosed means the manager was closed; every call fails with it after
	// Close.
	ErrClosed = errors.New("session manager closed")
	// ErrNotFound means no session exists for the key.
	ErrNotFound = errors.New("no such session")
	// ErrInvalidKey means a session key was empty or too long.
	ErrInvalidKey = errors.New("invalid session key")
	// ErrSessionLost means the session's container was removed, killed or
	// stopped from outside (or the engine restarted): its state is gone. The
	// next call on the key starts a fresh session.
	ErrSessionLost = driver.ErrSessionLost
	// ErrUnavailable means the container engine could not be reached.
	ErrUnavailable = driver.ErrUnavailable
	// ErrImageMissing means the sandbox image does not exist: run sandbox-setup.
	ErrImageMissing = driver.ErrImageMissing
	// ErrImageStale means the sandbox image was built from other sources or
	// speaks another protocol: run sandbox-setup.
	ErrImageStale = errors.New("sandbox image stale")
	// ErrNotSandboxImage means the sandbox image carries none of agentbox's
	// labels (debian:bookworm, python:3.11): it has no init or kernel of
	// ours, so build one with sandbox-setup or derive one from
	// agentbox-sandbox:latest. It also matches ErrImageStale, so code that
	// handles a stale image (by asking for sandbox-setup) handles it too.
	ErrNotSandboxImage error = &notSandboxImage{}
	// ErrUnknownExecution means neither the kernel nor the history knows an
	// execution id. It is kernel.ErrUnknownExecution.
	ErrUnknownExecution = kernel.ErrUnknownExecution
	// ErrOutcomeUnknown means an execution id started, and the session was
	// lost (or its kernel forgot it) before its result reached the
	// history: whether, and how far, the code ran cannot be known. The id
	// is never run again; this is its answer for good.
	ErrOutcomeUnknown = errors.New("outcome unknown: the session was lost while this execution ran")

	// ErrContainerNotFound is what a Driver returns for a container that does
	// not exist.
	ErrContainerNotFound = driver.ErrContainerNotFound
	// ErrNameInUse is what a Driver returns when creating or renaming a
	// container to a name another container has.
	ErrNameInUse = driver.ErrNameInUse
	// ErrContainerStart is what a Driver's Create returns when the engine
	// made the container but could not start its first process (the
	// container is removed again).
	ErrContainerStart = driver.ErrContainerStart
)

// notSandboxImage is the type of ErrNotSandboxImage.
type notSandboxImage struct{}

func (*notSandboxImage) Error() string        { return "not an agentbox sandbox image" }
func (*notSandboxImage) Is(target error) bool { return target == ErrImageStale }

// Error is a failure of an operation on one session. It wraps the cause, so
// errors.Is(err, ErrSessionLost) and the like work through it.
type Error struct {
	Op          string // "exec", "start", "stop", "fetch"
	Key         string // the session key
	ContainerID string // when known
	Err         error
}

func (e *Error) Error() string {
	if e.ContainerID != "" {
		return fmt.Sprintf("session %s (container %s): %s: %v", quoteKey(e.Key), shortID(e.ContainerID), e.Op, e.Err)
	}
	return fmt.Sprintf("session %s: %s: %v", quoteKey(e.Key), e.Op, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
