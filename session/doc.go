// Package session is agentbox's front door: a Manager pins one sandbox
// container per session key (a conversation or thread id) and runs Python
// code in the persistent kernel inside it.
//
// # Lifecycle
//
// NewManager checks the sandbox image, opens the history database
// (ARTIFACTS_DB) and starts two background loops: the sweep, which removes
// sessions idle for IDLE_TIMEOUT_S (or, with IDLE_ACTION=pause, pauses
// them until their next call, and removes them after
// IDLE_PAUSED_TIMEOUT_S paused) and containers no manager can use, and,
// when POOL_SIZE > 0, the warm pool's filler. Exec on an unknown key starts
// its container (or takes a warm one); on a known key it reuses it. Close
// stops the loops, waits for calls in flight and removes the warm
// containers; session containers keep running, and a Manager started later
// (in this process or another, such as the agentbox command) reattaches to
// them with their kernel state intact. After Close every call fails with
// ErrClosed.
//
// Containers are named <namespace>_<session id>: the engine keeps names
// unique, so two processes creating the same key end up with one container,
// and a new process finds a key's container from the key alone (ID). The
// namespace is the Config's (AGENTBOX_NAMESPACE, default "agentbox") unless
// WithNamespace names another, so every program with the same settings (a
// backend, the agentbox command, session-viewer) sees the same sessions. A
// warm container (<namespace>_pool_<suffix>) becomes a key's session by
// being renamed; the name, not a label, says what a container is.
//
// # Pause, time to live, per-session options
//
// Pause freezes a session's container (memory kept, no CPU) until Resume;
// a paused session is never evicted for idleness, and every call that would
// reach its kernel fails with ErrPaused, in any process (only a pause by
// the idle sweep is undone by the next call; Info.PausedBy says which). A
// session may have a time to live (TTL, default SESSION_TTL_S) that Renew
// extends: past it the session is removed, used or not, by any manager's
// sweep or at its next call, and reads as expired at once. Start, or Exec
// with CreateWith, creates a session with options of its own (Env, Labels,
// TTL, MemoryMB, CPUs, UseImage, OnIdle), checked against
// the operator's maxima and never trimmed. Pause and expiry live in the
// engine and the database, so every process sees them; Info reads both.
//
// # Concurrency
//
// A Manager is safe for concurrent use. Calls on one key are serialized in
// this process (and the kernel serializes executions across processes);
// calls on different keys run in parallel. Concurrent calls for the same new
// key share one container start.
//
// # Contexts and errors
//
// Every call that waits takes a context. Ending it while code runs interrupts
// the code (KeyboardInterrupt): the result still returns, flagged TimedOut or
// Interrupted. A Python exception is data in Result.Error; a Go error means
// the system failed and wraps one of this package's sentinels (ErrSessionLost,
// ErrUnavailable, ErrImageMissing, ...) in an *Error naming the key.
//
// # Files
//
// WriteFiles, ReadFile, StatFile, ListFiles, Glob, MakeDir, MoveFile and
// RemoveFile reach a session's files without running code. Each runs as
// the sandbox user in a short helper process in the container, beside the
// kernel (not waiting for a running execution, not counted as one), so
// paths are the sandbox's own and permissions the sandbox user's; their
// errors are *FileError values wrapping ErrFileNotFound, ErrPermission,
// ErrFileTooLarge, ErrNoSpace and the like. A paused session is ErrPaused.
//
// # Storage
//
// In TMPFS mode /session is RAM inside the container. In BIND mode it is
// SESSIONS_ROOT/<session id> on the host, which also receives session.log,
// session_metadata.json and python_state.json after every execution, and
// stays when the session ends.
package session
