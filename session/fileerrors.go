package session

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Errors of the files API (WriteFiles, ReadFile, StatFile, ListFiles, Glob,
// RemoveFile, MakeDir, MoveFile), each wrapped in a *FileError naming the
// session and the path.
var (
	// ErrFileNotFound means no file or folder is at the path (or a folder
	// on the way is missing). errors.Is(err, fs.ErrNotExist) holds too.
	ErrFileNotFound = errors.New("no such file or folder")
	// ErrIsDir means a folder is where a file was expected.
	ErrIsDir = errors.New("is a folder")
	// ErrNotDir means a file is where a folder was expected.
	ErrNotDir = errors.New("not a folder")
	// ErrNotRegular means the path is a named pipe, socket or device: the
	// files API reads and replaces regular files only, and never blocks on
	// a pipe.
	ErrNotRegular = errors.New("not a regular file")
	// ErrPermission means the sandbox user may not do it (the container's
	// read-only root, another user's file). errors.Is(err, fs.ErrPermission)
	// holds too.
	ErrPermission = errors.New("permission denied")
	// ErrFileExists means the destination exists and overwriting was not
	// asked for. errors.Is(err, fs.ErrExist) holds too.
	ErrFileExists = errors.New("file exists")
	// ErrNotEmpty means a folder to remove has entries and the removal was
	// not recursive.
	ErrNotEmpty = errors.New("folder not empty")
	// ErrFileTooLarge means a file, or a call, is over its cap
	// (FILES_MAX_FILE_MB, FILES_MAX_CALL_MB).
	ErrFileTooLarge = errors.New("file too large")
	// ErrNoSpace means the filesystem is full: /session (TMPFS_SIZE_MB in
	// TMPFS mode, the host's disk in BIND mode) or /tmp.
	ErrNoSpace = errors.New("no space left")
	// ErrBadPath means a path the files API refuses before touching
	// anything: empty, with a ".." element or a NUL byte, too long, or a
	// mount point such as /session that cannot be removed or replaced.
	ErrBadPath = errors.New("invalid path")
)

// FileError is a failure of one file operation in a session. It wraps the
// cause (one of the errors above, or the engine's), so errors.Is and
// errors.As work through it.
type FileError struct {
	Op   string // "write", "read", "stat", "list", "glob", "remove", "mkdir", "move"
	Key  string // the session key
	Path string // the path in the sandbox, as cleaned
	Err  error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("session %s: %s %s: %v", quoteKey(e.Key), e.Op, quotePath(e.Path), e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// Is makes the files API's errors match io/fs's, so code written against
// os errors works unchanged.
func (e *FileError) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return errors.Is(e.Err, ErrFileNotFound)
	case fs.ErrPermission:
		return errors.Is(e.Err, ErrPermission)
	case fs.ErrExist:
		return errors.Is(e.Err, ErrFileExists)
	}
	return false
}

// helperKinds maps the helper's error kinds onto the sentinels.
var helperKinds = map[string]error{
	"not_found":   ErrFileNotFound,
	"is_dir":      ErrIsDir,
	"not_dir":     ErrNotDir,
	"not_regular": ErrNotRegular,
	"permission":  ErrPermission,
	"exists":      ErrFileExists,
	"not_empty":   ErrNotEmpty,
	"too_large":   ErrFileTooLarge,
	"no_space":    ErrNoSpace,
	"bad_path":    ErrBadPath,
}

// helperError is an error the helper reported.
type helperError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// err returns the sentinel of the kind, with the helper's words when they
// add to it.
func (h *helperError) err() error {
	s, ok := helperKinds[h.Kind]
	if !ok {
		return fmt.Errorf("%s", h.Message)
	}
	if h.Message == "" || strings.EqualFold(h.Message, s.Error()) {
		return s
	}
	return fmt.Errorf("%w (%s)", s, h.Message)
}
