// Package sessiontest provides an in-memory session.Driver for tests, in the
// way net/http/httptest provides servers: a session.Manager runs on it with no
// container engine, fast and under -race.
//
// # Driver
//
// NewDriver returns a Driver that keeps containers as records (id, name,
// image, labels, running state, creation time) and knows the images
// registered with AddImage; it starts out knowing SandboxImage, labelled as
// the current sandbox image, so that
//
//	session.NewManager(ctx, cfg, session.WithDriver(sessiontest.NewDriver()))
//
// accepts it with config.Default()'s SANDBOX_IMAGE. It fails exactly as the
// session.Driver contract says: session.ErrContainerNotFound,
// session.ErrNameInUse, session.ErrImageMissing and, while SetUnavailable is
// on, session.ErrUnavailable. The conformance suite in package session runs
// the same checks against this Driver and the Docker one.
//
// Faults are injected from the test: Kill stops a container (its kernel
// state is gone, its streams break), RemoveBehindBack removes it as someone
// else would, SetUnavailable cuts the engine off and FailNextCreate fails one
// Create. Containers, Created and Peak let a test look at what the Manager
// did.
//
// # Kernel
//
// Connect returns one end of a net.Pipe served by the container's fake
// kernel, which speaks the real wire protocol (package kernel): a hello
// first, then execute, get, interrupt, inspect and ping. Like the real
// kernel it has one state shared by every connection, runs executions one
// at a time, keeps every result by execution id (the same id again replays
// it, the same id with other code is an id_conflict) and enforces timeouts.
//
// It does not run Python. It runs a tiny language, statement by statement
// (lines, or statements separated by ';'):
//
//	print(<expr or text>)   writes the value, or the text as is, and a newline to stdout
//	<name> = <expr>         sets a variable
//	<expr>                  as the last statement: an execute_result with its repr
//	raise <Name>(<msg>)     raises exception Name with value msg
//	sleep(<seconds>)        waits (time.sleep too); interrupt or timeout end it
//	                        with KeyboardInterrupt
//
// where an expression is ints, quoted strings and names joined by +, - and
// *; an unset name raises NameError. Imports, comments and anything else do
// nothing. Code in the common part (x = 42, then x) gives the same result
// here and in a real sandbox.
//
// Everything is in memory and ends with the Driver; there is nothing to
// close.
package sessiontest
