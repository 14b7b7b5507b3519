package store

import "errors"

// ErrNotFound reports that no row matches: no session with that namespace
// and id, or no execution with that exec id.
var ErrNotFound = errors.New("not found")

// ErrSchemaTooNew reports that the database was migrated by a newer agentbox
// than this binary: it records a schema version this binary does not know.
// Open returns it wrapped with the path; upgrade the binary.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")
