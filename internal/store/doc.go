// Package store is the SQLite database of agentbox: the sessions the manager
// knows (running or stopped), the execution history of each session and,
// later, the artifact index. Its file is the one config.ArtifactsDB names.
//
// Several processes open the same file at once, a backend and a CLI for
// example. The file runs in WAL mode with a busy timeout of about ten seconds,
// every transaction begins IMMEDIATE, and the embedded schema migrations are
// applied one by one under that write lock, so concurrent Opens neither fail
// nor apply a migration twice. A file migrated by a newer binary is refused
// with ErrSchemaTooNew.
//
// Lifecycle: Open creates the file and its directory if needed, migrates it
// and returns a Store safe for concurrent use; Close releases it. DB exposes
// the pool for packages that keep their own tables in the same file.
//
// Context policy: every call that touches the file takes a context first and
// stops waiting (for the busy lock or the query) when it is done. Nothing is
// kept from a context after a call returns.
//
// Times are stored as RFC 3339 UTC text with nine fractional digits, so they
// round-trip exactly and sort as text; durations as integer nanoseconds;
// structured fields as JSON. Long text is capped when recorded (see
// Store.MaxOutput and Store.MaxCode).
package store
