package datasets

import (
	"errors"
	"fmt"
)

// ErrInvalidID reports a dataset id that cannot name anything: empty, holding
// a NUL byte, or longer than MaxIDLength bytes.
var ErrInvalidID = errors.New("invalid dataset id")

// ErrNotFound reports that something does not exist: no status row for a
// session and dataset, or (inside a *FetchError) a source answering 404.
var ErrNotFound = errors.New("not found")

// ErrTooLarge reports a dataset larger than the size cap. It is found inside
// a *FetchError.
var ErrTooLarge = errors.New("dataset too large")

// ErrFormat reports content that is not the format its name claims, such as a
// ".parquet" dataset without Parquet's magic bytes, or a file Describe cannot
// parse as the format of its extension.
var ErrFormat = errors.New("not the format it claims")

// ErrClosed reports a call on a Cache after Close.
var ErrClosed = errors.New("dataset cache closed")

// FetchError reports why a dataset could not be obtained: the source failed
// or answered an HTTP error, timed out, or sent too much or the wrong format.
// HTTPFetcher and Cache.Get return failures of the source or the content as
// a *FetchError, so its text can go to the agent as the FAILED reason. Err is the cause:
// ErrNotFound for HTTP 404, ErrTooLarge, ErrFormat, or context errors for
// timeouts and cancellation; match it with errors.Is.
type FetchError struct {
	ID     string // the dataset id
	Status int    // the HTTP status when the source answered one, else 0
	Err    error  // the cause
}

// Error names the dataset, the HTTP status when there is one, and the cause.
func (e *FetchError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("fetch dataset %q: HTTP %d: %v", e.ID, e.Status, e.Err)
	}
	return fmt.Sprintf("fetch dataset %q: %v", e.ID, e.Err)
}

// Unwrap returns the cause.
func (e *FetchError) Unwrap() error { return e.Err }
