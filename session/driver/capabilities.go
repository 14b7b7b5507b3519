package driver

import (
	"context"
	"io"
)

// The optional capabilities of a Driver. The Manager finds each by a type
// assertion on its Driver; an engine that lacks one still runs code, and
// the feature that needs it is refused (errors.ErrUnsupported) or takes
// the other road its comment names. The Docker driver has them all.

// Stream is a process's standard input (Write, CloseWrite) and output
// (Read), as CommandStreamer and ExecStreamer return it.
type Stream interface {
	io.ReadWriteCloser
	CloseWrite() error
	// Stderr is what the process wrote to its standard error so far.
	Stderr() string
}

// CommandStreamer starts a process in a container as a user with its
// standard input and output joined to a stream: what shell commands
// (Manager.Run, StartCommand) run over, and the probes that look at a
// container's init and at its running commands. Closing the stream ends
// the process's input. Without it shell commands are ErrUnsupported and
// the sweep counts no running commands.
type CommandStreamer interface {
	StreamCommand(ctx context.Context, id, user string, cmd []string) (Stream, error)
}

// ExecStreamer starts a helper process in a container as a user and joins
// its standard input and output, as CommandStreamer does, but says
// ErrPaused for a frozen container and ErrSessionLost for a stopped or
// missing one. The files API (Manager.ReadFile, WriteFile, ListFiles, ...)
// runs its helper over it; without it the files API is ErrUnsupported.
type ExecStreamer interface {
	ExecStream(ctx context.Context, id, user string, cmd []string) (Stream, error)
}

// CommandRunner runs a short helper command in a container as a user, its
// standard input given, and returns the first maxOut bytes of its
// standard output; when it wrote nothing there, what it wrote to standard
// error is the error. It is not for user code, which only the kernel
// runs. Manager.IsComplete needs it (ErrUnsupported without).
type CommandRunner interface {
	RunCommand(ctx context.Context, id, user string, cmd []string, stdin io.Reader, maxOut int) ([]byte, error)
}

// FileReader streams regular files (names relative to dir) out of a
// container, calling fn for each in turn, never following links: how
// artifacts and dataset exports are read from a TMPFS session whose
// container's root is not visible on this host (HostRooter). Without it
// those reads fail with a message.
type FileReader interface {
	ReadFiles(ctx context.Context, id, user, dir string, names []string, fn func(name string, r io.Reader) error) error
}

// FileWriter writes a file into a container as user, through a temporary
// name so that code never sees half a file: how files are staged into a
// TMPFS session on a remote engine. Without it such staging fails with a
// message.
type FileWriter interface {
	WriteFile(ctx context.Context, id, user, path string, r io.Reader) error
}

// FileRemover deletes one file in a container as user, without going
// through the kernel (which would count as an execution): how an ingested
// artifact is removed from a TMPFS session on a remote engine. Without it
// the removal fails with a message.
type FileRemover interface {
	RemoveFile(ctx context.Context, id, user, path string) error
}

// HostRooter names a container's root filesystem as this host sees it
// (/proc/<pid>/root), or "" when it cannot: a TMPFS session's files are
// then read and written directly, as fast as a local disk. Without it
// they go through FileReader, FileWriter and FileRemover.
type HostRooter interface {
	HostRoot(ctx context.Context, id string) string
}

// Pauser freezes and thaws a container (Manager.Pause, Manager.Resume;
// ErrUnsupported without).
type Pauser interface {
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
}

// MemoryReader reports a running container's memory use, in bytes, for
// Manager.Info and List; without it the memory in use is not shown.
type MemoryReader interface {
	MemoryUsage(ctx context.Context, id string) (int64, error)
}

// EngineMemory reports the memory of the engine's host, in bytes; 0 means
// unknown. The Manager fits memory requests to it and warns when the
// default session does not fit; without it requests are given as asked.
type EngineMemory interface {
	EngineMemory(ctx context.Context) (int64, error)
}
