package config

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
)

// ErrInvalid is matched (with errors.Is) by every error that reports a bad
// setting: a *VarError for one variable, and a *FileError for an env file
// that could be read but not parsed. An env file that cannot be read at all
// (permissions, a directory) does not match it: that is an I/O problem, not
// a configuration one.
var ErrInvalid = errors.New("invalid configuration")

// VarError reports one environment variable with a value the package does not
// accept. Its message has the shape
//
//	TMPFS_SIZE_MB="lots": want an integer ≥ 16
//
// so an operator sees the variable, what it held and what would be accepted.
// FromLookup and Validate join one VarError per bad variable, so each one can
// be pulled out with errors.As.
type VarError struct {
	// Name is the environment variable, such as "SESSION_STORAGE".
	Name string
	// Value is the offending value after trimming whitespace. When Secret is
	// true it is a redacted description such as "<redacted, 12 chars>" and
	// never the value itself, so the error can be logged or printed with any
	// verb without leaking the secret.
	Value string
	// Want says what a good value looks like, such as "TMPFS or BIND".
	Want string
	// Secret marks a variable whose value must not be shown.
	Secret bool
}

// Error returns `NAME="value": want ...`, or `NAME=<redacted, N chars>: want
// ...` for a secret.
func (e *VarError) Error() string {
	if e.Secret {
		return e.Name + "=" + e.Value + ": want " + e.Want
	}
	return e.Name + "=" + strconv.Quote(e.Value) + ": want " + e.Want
}

// Is reports whether target is ErrInvalid.
func (e *VarError) Is(target error) bool { return target == ErrInvalid }

// redacted describes a secret by its length only.
func redacted(secret string) string {
	return fmt.Sprintf("<redacted, %d chars>", len([]rune(secret)))
}

// FileError reports an env file that exists but could not be read or parsed.
//
// The message names the file and, for a syntax error, the line. It never
// repeats the file's contents: the parser's own messages quote the rest of the
// file, which would print secrets such as ARTIFACT_TOKEN_SECRET into logs.
type FileError struct {
	// Path is the file as given to LoadFile.
	Path string
	// Line is the 1-based line of a syntax error, or 0 when unknown or when
	// the file could not be read.
	Line int
	// Err is the cause: an *fs.PathError when the file could not be read, or
	// a short description of the syntax error.
	Err error
}

// Error returns `env file ".env": line 3: unterminated quoted value` or
// `env file ".env": permission denied`.
func (e *FileError) Error() string {
	msg := "env file " + strconv.Quote(e.Path) + ": "
	if e.Line > 0 {
		msg += "line " + strconv.Itoa(e.Line) + ": "
	}
	var pe *fs.PathError
	if errors.As(e.Err, &pe) {
		// The path error repeats the path; its bare cause reads better.
		return msg + pe.Err.Error()
	}
	return msg + e.Err.Error()
}

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalid, which holds when the file was read
// but is malformed.
func (e *FileError) Is(target error) bool {
	var pe *fs.PathError
	return target == ErrInvalid && !errors.As(e.Err, &pe)
}
