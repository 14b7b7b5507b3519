package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/agentbox/agentbox/session"
)

// Bounds on what the viewer reads of a session folder's records, so that a
// sandbox (which could write them in the old layout) or a damaged file
// cannot make it read without end.
const (
	maxLogBytes    = 64 << 20 // session.log: at most its last 64 MiB
	maxRecordBytes = 4 << 20  // each JSON record
)

// workspaceDir is the sandbox's /session inside a session folder of the
// BIND layout that keeps the records out of the sandbox's reach:
//
//	DIR/                  host-owned: session.log, session_metadata.json,
//	                      python_state.json, cache_datasets.json
//	DIR/workspace/        the sandbox's /session (artifacts/, data/, ...)
//
// In the old layout there is no workspace/: DIR is the sandbox's /session
// and the records sit in it, where the sandbox could have rewritten them.
const workspaceDir = "workspace"

var (
	errSymlink    = errors.New("a symbolic link, not followed")
	errNotRegular = errors.New("not a regular file")
	errTooLarge   = errors.New("too large")
	errChanged    = errors.New("replaced while being opened, not read")
)

// folder is a BIND session folder opened for reading. Every record is
// opened through dir (a descriptor of the folder, from an os.Root), by its
// own name, never following a link and never opening anything but a
// regular file, without blocking: the folder may hold whatever a sandbox
// planted there.
type folder struct {
	path string
	root *os.Root
	dir  *os.File // the folder itself, for openat

	// forgeable says why the records may have been written by the sandbox,
	// or is empty when the layout keeps them out of its reach.
	forgeable string
}

// openFolder opens the session folder path and finds its layout.
func openFolder(path string) (*folder, error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, recordError("session folder", err)
	}
	dir, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, recordError("session folder", err)
	}
	f := &folder{path: path, root: root, dir: dir}
	di, err := dir.Stat()
	if err != nil {
		f.Close()
		return nil, recordError("session folder", err)
	}
	ws, err := root.Lstat(workspaceDir)
	switch {
	case err != nil || !ws.IsDir():
		// A workspace that is a link is no workspace: the sandbox may have
		// made it.
		f.forgeable = "these records are in the folder the sandbox itself could write " +
			"(a session folder without workspace/, from before the records moved out of its reach): they may be forged"
	case di.Mode().Perm()&0o022 != 0:
		f.forgeable = fmt.Sprintf("the folder holding these records is writable by other users (mode %#o), "+
			"the sandbox's user among them: they may be forged", di.Mode().Perm())
	default:
		// The sandbox could have made workspace/ itself in an old-layout
		// folder it owns; a folder only the viewer's user (or root) can
		// write was not written by a sandbox running as another user.
		if uid, ok := ownerOf(di); ok && uid != os.Geteuid() && uid != 0 {
			f.forgeable = fmt.Sprintf("the folder holding these records belongs to uid %d, "+
				"which may be the sandbox's user: they may be forged", uid)
		}
	}
	return f, nil
}

func (f *folder) Close() error {
	return errors.Join(f.dir.Close(), f.root.Close())
}

// open opens the record name (a name in the folder, not a path) for
// reading. It refuses, with an error naming the record and the reason, a
// symbolic link (wherever it points), anything but a regular file (a
// named pipe would block a reader), and a file swapped between its check
// and its opening. A missing record's error matches fs.ErrNotExist.
func (f *folder) open(name string) (*os.File, fs.FileInfo, error) {
	before, err := f.root.Lstat(name)
	if err != nil {
		return nil, nil, recordError(name, err)
	}
	if err := checkKind(before); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	file, err := openNoFollow(f.root, f.dir, name)
	if err != nil {
		return nil, nil, recordError(name, err)
	}
	after, err := file.Stat()
	if err == nil {
		err = checkKind(after)
	}
	if err == nil && !os.SameFile(before, after) {
		err = errChanged
	}
	if err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return file, after, nil
}

// recordError names the record in err, dropping the operation and path an
// *fs.PathError repeats.
func recordError(name string, err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", name, err)
}

// checkKind refuses what is not a regular file, naming what it is.
func checkKind(fi fs.FileInfo) error {
	m := fi.Mode()
	var kind string
	switch {
	case m.IsRegular():
		return nil
	case m&fs.ModeSymlink != 0:
		return errSymlink
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	default:
		kind = "of kind " + m.Type().String()
	}
	return fmt.Errorf("%w (%s)", errNotRegular, kind)
}

// readJSON decodes the JSON record name into v, refusing one larger than
// maxRecordBytes.
func (f *folder) readJSON(name string, v any) error {
	file, fi, err := f.open(name)
	if err != nil {
		return err
	}
	defer file.Close()
	tooLarge := fmt.Errorf("%s: larger than %d MiB, not read: %w", name, maxRecordBytes>>20, errTooLarge)
	if fi.Size() > maxRecordBytes {
		return tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(file, maxRecordBytes+1))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > maxRecordBytes { // it grew since the check
		return tooLarge
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// readLog reads the whole lines of session.log from byte off, at most
// maxLogBytes of them, and returns them with the offset after the last.
// With tail (the first view), when more than maxLogBytes follow off, it
// reads the last maxLogBytes instead, from the first line that starts in
// them, and says so in note. Lines that are not JSON are skipped, and
// said so in err, which does not stop the lines after them.
func (f *folder) readLog(off int64, tail bool) (entries []session.LogEntry, next int64, note string, err error) {
	file, fi, err := f.open(session.LogFile)
	if err != nil {
		return nil, off, "", err
	}
	defer file.Close()
	size := fi.Size()
	if size <= off {
		return nil, off, "", nil
	}
	start := off
	if tail && size-off > maxLogBytes {
		start = size - maxLogBytes
		note = fmt.Sprintf("%s: larger than %d MiB (%s): only the executions in its last %d MiB are shown",
			session.LogFile, maxLogBytes>>20, fmtBytes(size), maxLogBytes>>20)
	}
	buf := make([]byte, min(size-start, maxLogBytes))
	n, err := file.ReadAt(buf, start)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, off, note, fmt.Errorf("%s: %w", session.LogFile, err)
	}
	buf = buf[:n]
	if start > off {
		// Started in the middle of a line: begin at the next one.
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return nil, start + int64(len(buf)), note, nil
		}
		buf, start = buf[i+1:], start+int64(i+1)
	}
	var bad int
	var firstBad int64
	pos := 0
	for {
		i := bytes.IndexByte(buf[pos:], '\n')
		if i < 0 {
			break // the end, or half a line still being written
		}
		line := buf[pos : pos+i+1]
		at := start + int64(pos)
		pos += i + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e session.LogEntry
		if err := json.Unmarshal(line, &e); err != nil {
			if bad == 0 {
				firstBad = at
			}
			bad++
			continue
		}
		entries = append(entries, e)
	}
	next = start + int64(pos)
	if pos == 0 && len(buf) == maxLogBytes {
		// One line longer than the bound: it can never be read whole.
		return nil, start + int64(len(buf)), note, fmt.Errorf("%s: the line at byte %d is longer than %d MiB: skipped",
			session.LogFile, start, maxLogBytes>>20)
	}
	switch {
	case bad == 1:
		err = fmt.Errorf("%s: the line at byte %d is not a JSON execution: skipped", session.LogFile, firstBad)
	case bad > 1:
		err = fmt.Errorf("%s: %d lines are not JSON executions, the first at byte %d: skipped", session.LogFile, bad, firstBad)
	}
	return entries, next, note, err
}
