package kernel

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed means the client was closed.
	ErrClosed = errors.New("kernel client closed")
	// ErrConnectionLost means the stream to the kernel broke. An execution
	// in flight may still finish: reconnect and Fetch it by id.
	ErrConnectionLost = errors.New("connection to the kernel lost")
	// ErrProtocol means the other side sent something this client cannot read.
	ErrProtocol = errors.New("kernel protocol error")
	// ErrProtocolMismatch means the image speaks another protocol version.
	ErrProtocolMismatch = errors.New("kernel protocol version mismatch")
	// ErrUnknownExecution means the kernel has no record of an execution id.
	ErrUnknownExecution = errors.New("unknown execution")
	// ErrIDConflict means an execution id was reused for different code.
	ErrIDConflict = errors.New("execution id already used for different code")
	// ErrRejected means the kernel refused a request as malformed.
	ErrRejected = errors.New("request rejected by the kernel")
	// ErrFrameTooLarge means a frame exceeded MaxFrame.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrUnresponsive means the init (the kernel's broker) stopped
	// answering: a stopped, wedged or starved PID 1. Nothing it holds can
	// be trusted to come back; the session is lost.
	ErrUnresponsive = errors.New("the sandbox's init does not answer")
)

// VersionError is returned when the kernel announces a protocol version this
// client does not speak.
type VersionError struct {
	Got, Want int
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("the sandbox image speaks kernel protocol %d but this program speaks %d: rebuild the image with sandbox-setup", e.Got, e.Want)
}

func (e *VersionError) Unwrap() error { return ErrProtocolMismatch }

// ExecError is a failure of one execution's transport (not a Python exception,
// which is data in Result). ID lets the caller fetch the result later.
type ExecError struct {
	ID  string
	Err error
}

func (e *ExecError) Error() string { return fmt.Sprintf("execution %s: %v", e.ID, e.Err) }

func (e *ExecError) Unwrap() error { return e.Err }

// remoteError is an error frame from the init.
func remoteError(code, msg string) error {
	switch code {
	case "unknown_execution":
		return fmt.Errorf("%w: %s", ErrUnknownExecution, msg)
	case "id_conflict":
		// The init's message says what ErrIDConflict says, and the
		// ExecError around it names the id: it would only repeat them.
		return ErrIDConflict
	case "frame_too_large":
		return fmt.Errorf("%w: %s", ErrFrameTooLarge, msg)
	case "kernel_died":
		return fmt.Errorf("%w: %s", ErrConnectionLost, msg)
	}
	return fmt.Errorf("%w: %s: %s", ErrRejected, code, msg)
}
