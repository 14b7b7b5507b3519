package session

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
)

// ErrStorageFull means the server's own storage (the disk holding
// ARTIFACTS_DB, BLOBSTORE_DIR or SESSIONS_ROOT) is full: the operator must
// make room. It is not ErrNoSpace, a sandbox's own /session being full.
var ErrStorageFull = errors.New("the server's disk is full")

// storageError is a failure of the server's own storage as callers see
// it: what failed and why, never a host path (the tenants of a server
// read these messages). Unwrap gives the cause, paths and all, for the
// operator's log.
type storageError struct {
	msg string
	err error
}

func (e *storageError) Error() string { return e.msg }

// Unwrap is the cause, and ErrStorageFull and ErrNoSpace for a full disk.
func (e *storageError) Unwrap() []error {
	if isFull(e.err) {
		return []error{ErrStorageFull, ErrNoSpace, e.err}
	}
	return []error{e.err}
}

// isFull reports whether err is a full disk or database.
func isFull(err error) bool {
	return diskFull(err) || errors.Is(err, syscall.EDQUOT)
}

// storageTrouble describes a failure of what (such as "the server's
// database") to store, for callers: a full disk is named as such; other
// causes are kept, with host paths left out.
func (m *Manager) storageTrouble(err error, what string) *storageError {
	if isFull(err) {
		return &storageError{msg: what + ": " + ErrStorageFull.Error(), err: err}
	}
	return &storageError{msg: what + ": " + m.withoutHostPaths(err), err: err}
}

// withoutHostPaths is err's text with the paths of the server's own files
// left out: an *fs.PathError (or *os.LinkError) is its operation and
// cause; the configured folders, wherever else they appear, become the
// name of their setting.
func (m *Manager) withoutHostPaths(err error) string {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Op + ": " + pe.Err.Error()
	case errors.As(err, &le):
		return le.Op + ": " + le.Err.Error()
	}
	msg := err.Error()
	type setting struct{ path, name string }
	var paths []setting
	for _, s := range []setting{
		{m.cfg.ArtifactsDB, "ARTIFACTS_DB"}, {m.cfg.BlobstoreDir, "BLOBSTORE_DIR"},
		{m.cfg.SessionsRoot, "SESSIONS_ROOT"}, {m.cfg.DatasetsHostRO, "DATASETS_HOST_RO"},
	} {
		if len(s.path) > 1 {
			paths = append(paths, s)
		}
	}
	// Longest first, so that a folder inside another keeps its own name.
	slices.SortFunc(paths, func(a, b setting) int { return cmp.Compare(len(b.path), len(a.path)) })
	for _, s := range paths {
		msg = strings.ReplaceAll(msg, s.path, "<"+s.name+">")
	}
	return msg
}
