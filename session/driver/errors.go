package driver

import "errors"

// The errors a Driver returns, each possibly wrapped; package session
// re-exports them under the same names, so errors.Is(err, session.ErrX)
// holds for a driver's ErrX. The messages are the ones session's callers
// have always seen.
var (
	// ErrUnavailable means the container engine could not be reached.
	ErrUnavailable = errors.New("sandbox engine unavailable")
	// ErrImageMissing means the image does not exist (Image, Create).
	ErrImageMissing = errors.New("sandbox image missing")
	// ErrContainerNotFound means the container does not exist.
	ErrContainerNotFound = errors.New("container not found")
	// ErrNameInUse means another container has the name (Create, Rename).
	ErrNameInUse = errors.New("container name in use")
	// ErrContainerStart means Create made the container but the engine
	// could not start its first process (the container is removed again).
	ErrContainerStart = errors.New("container could not start")
	// ErrPaused means the container is frozen, so nothing can start in it
	// (ExecStreamer).
	ErrPaused = errors.New("session paused")
	// ErrSessionLost means the container a session lives in was removed or
	// stopped, so nothing can start in it (ExecStreamer); to the Manager
	// the session's state is gone.
	ErrSessionLost = errors.New("session lost")
)
