package session

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// The files API moves files in and out of a session and looks at its
// folders. Every operation runs in the session's container as the sandbox
// user (a short helper process beside the kernel), so paths are the
// sandbox's own and permissions the sandbox user's: /session (with /app
// and /workspace, the image's links into it) and /tmp are writable, the
// rest of the container is not, and a path, or a link the
// code planted, can only ever resolve inside the container, never on the
// host. Bytes travel through the engine's exec stream, streamed both ways.
//
// An operation does not wait for a running execution (files and code
// share the session, not its turn) and does not count as one; it does
// keep the session from idling out. On a paused session it fails with
// ErrPaused: it never thaws the container behind the caller's back.

// FileType is what kind of file a FileInfo describes.
type FileType string

// File types.
const (
	TypeFile    FileType = "file"
	TypeDir     FileType = "dir"
	TypeSymlink FileType = "symlink"
	TypeFIFO    FileType = "fifo"
	TypeSocket  FileType = "socket"
	TypeDevice  FileType = "device"
	TypeOther   FileType = "other"
)

// FileInfo describes a file or folder in a session, as the sandbox sees it.
// A symbolic link is described itself, not followed.
type FileInfo struct {
	Path    string      `json:"path"`             // absolute, in the sandbox
	Type    FileType    `json:"type"`             // file, dir, symlink, ...
	Size    int64       `json:"size"`             // in bytes
	Mode    fs.FileMode `json:"mode"`             // permission bits (with setuid, setgid, sticky); the kind is Type, FileMode() has both
	ModTime time.Time   `json:"mtime"`            // last modification
	Target  string      `json:"target,omitempty"` // a link's target, as written
}

// Name is the last element of the path.
func (f FileInfo) Name() string { return path.Base(f.Path) }

// FileMode is Mode with the type bits of io/fs set, as os.Lstat reports it.
func (f FileInfo) FileMode() fs.FileMode {
	switch f.Type {
	case TypeDir:
		return f.Mode | fs.ModeDir
	case TypeSymlink:
		return f.Mode | fs.ModeSymlink
	case TypeFIFO:
		return f.Mode | fs.ModeNamedPipe
	case TypeSocket:
		return f.Mode | fs.ModeSocket
	case TypeDevice:
		return f.Mode | fs.ModeDevice
	case TypeOther:
		return f.Mode | fs.ModeIrregular
	}
	return f.Mode
}

// IsDir reports whether f is a folder. Mode holds permission bits only
// (as chmod takes them); the kind is Type, or FileMode's type bits.
func (f FileInfo) IsDir() bool { return f.Type == TypeDir }

// wireInfo is a FileInfo as the helper sends it.
type wireInfo struct {
	Path    string   `json:"path"`
	Type    FileType `json:"type"`
	Size    int64    `json:"size"`
	Mode    uint32   `json:"mode"`
	MtimeNS int64    `json:"mtime_ns"`
	Target  string   `json:"target"`
	Offset  int64    `json:"offset"`
	Length  int64    `json:"length"`
}

func (w wireInfo) info() FileInfo {
	mode := fs.FileMode(w.Mode) & fs.ModePerm
	for bit, m := range map[uint32]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
		if w.Mode&bit != 0 {
			mode |= m
		}
	}
	return FileInfo{Path: w.Path, Type: w.Type, Size: w.Size, Mode: mode,
		ModTime: time.Unix(0, w.MtimeNS).UTC(), Target: w.Target}
}

// helperReply is the helper's one-line answer, or a line of a listing.
type helperReply struct {
	wireInfo
	Info      *wireInfo    `json:"info"`
	Error     *helperError `json:"error"`
	Done      bool         `json:"done"`
	Truncated bool         `json:"truncated"`
	OK        bool         `json:"ok"`
	// Of a written file.
	Aborted bool `json:"aborted"`
	// Of the commit of an all-or-nothing write.
	Committed bool          `json:"committed"`
	Errors    []commitError `json:"errors"`
}

// fileSession returns the key's open session without taking its turn, so
// that a file operation runs beside an execution; it marks the session
// used. The container id is set before the entry is ready and never
// changes after, so reading it without the turn is safe.
func (m *Manager) fileSession(ctx context.Context, key string, create bool) (*entry, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	for ended := 0; ; {
		e, err := m.entry(ctx, key, create, nil)
		if err != nil {
			return nil, err
		}
		err = m.checkLive(ctx, e, false)
		var ee *endedError
		if errors.As(err, &ee) {
			if ended++; ended <= maxEndedElsewhere {
				// Its turn is not held here: the client is closed by
				// whoever holds it, or now if nobody does.
				m.drop(e)
				m.closeIdle(e)
				continue
			}
			err = nil // the engine decides
		}
		if err != nil {
			if errors.Is(err, ErrExpired) && create {
				continue // removed: the next round makes a fresh one
			}
			return nil, err
		}
		m.mu.Lock()
		gone := e.gone
		m.mu.Unlock()
		if gone {
			continue
		}
		if err := m.markUsed(ctx, e); err != nil {
			if ended++; ended <= maxEndedElsewhere {
				m.drop(e)
				m.closeIdle(e)
				continue
			}
			return nil, fmt.Errorf("%w: %w", ErrSessionLost, err)
		}
		return e, nil
	}
}

// fileOp runs one single-answer helper op for the files API.
func (m *Manager) fileOp(ctx context.Context, key, op, p string, create bool, req map[string]any) (_ *helperReply, err error) {
	ctx, span := m.fileSpan(ctx, op, key, p)
	defer func() { endSpan(span, err) }()
	fail := func(err error) (*helperReply, error) {
		return nil, &FileError{Op: op, Key: key, Path: p, Err: err}
	}
	if err := m.begin(); err != nil {
		return fail(err)
	}
	defer m.calls.Done()
	e, err := m.fileSession(ctx, key, create)
	if err != nil {
		return fail(err)
	}
	h, err := m.startHelper(ctx, e, op, req, nil)
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	var r helperReply
	if err := h.next(ctx, &r); err != nil {
		return fail(err)
	}
	h.whole()
	if r.Error != nil {
		return fail(r.Error.err())
	}
	return &r, nil
}

// StatFile describes the file or folder at path in the session (a link
// itself, not what it points to). A relative path is taken from /session.
func (m *Manager) StatFile(ctx context.Context, key, path string) (FileInfo, error) {
	p, err := cleanPath(path)
	if err != nil {
		return FileInfo{}, &FileError{Op: "stat", Key: key, Path: path, Err: err}
	}
	r, err := m.fileOp(ctx, key, "stat", p, false, map[string]any{"path": p})
	if err != nil {
		return FileInfo{}, err
	}
	if r.Info == nil {
		return FileInfo{}, &FileError{Op: "stat", Key: key, Path: p, Err: errors.New("the file helper sent no description")}
	}
	return r.Info.info(), nil
}

// MakeDir makes the folder at path in the session, and its missing parents,
// with mode (0 means 0755; the sandbox's umask applies). An existing folder
// is no error; a file in the way is ErrNotDir. The session is started if
// needed.
func (m *Manager) MakeDir(ctx context.Context, key, path string, mode fs.FileMode) error {
	p, err := cleanPath(path)
	if err != nil {
		return &FileError{Op: "mkdir", Key: key, Path: path, Err: err}
	}
	if mode == 0 {
		mode = 0o755
	}
	_, err = m.fileOp(ctx, key, "mkdir", p, true, map[string]any{"path": p, "mode": uint32(mode.Perm())})
	return err
}

// mountPoints cannot be removed or replaced: the kernel refuses, and a
// recursive removal would empty them first.
var mountPoints = map[string]bool{"/": true, "/session": true, "/tmp": true, "/data": true}

// RemoveFile removes the file, link or folder at path in the session (a
// link itself, never what it points to). A folder with entries needs
// recursive, else it is ErrNotEmpty. /session and /tmp themselves cannot be
// removed (ErrBadPath).
func (m *Manager) RemoveFile(ctx context.Context, key, path string, recursive bool) error {
	p, err := cleanPath(path)
	if err == nil && mountPoints[p] {
		err = fmt.Errorf("%w: %s is a mount point; remove what is in it", ErrBadPath, p)
	}
	if err != nil {
		return &FileError{Op: "remove", Key: key, Path: path, Err: err}
	}
	_, err = m.fileOp(ctx, key, "remove", p, false, map[string]any{"path": p, "recursive": recursive})
	return err
}

// MoveFile renames src to dst in the session (files or folders; across
// /session and /tmp by copying, links copied as links). An existing dst is
// ErrFileExists unless overwrite is set; a folder cannot replace a file nor
// a file a folder.
func (m *Manager) MoveFile(ctx context.Context, key, src, dst string, overwrite bool) error {
	s, err := cleanPath(src)
	if err == nil && mountPoints[s] {
		err = fmt.Errorf("%w: %s is a mount point", ErrBadPath, s)
	}
	if err != nil {
		return &FileError{Op: "move", Key: key, Path: src, Err: err}
	}
	d, err := cleanPath(dst)
	if err == nil && mountPoints[d] {
		err = fmt.Errorf("%w: %s is a mount point", ErrBadPath, d)
	}
	if err != nil {
		return &FileError{Op: "move", Key: key, Path: dst, Err: err}
	}
	_, err = m.fileOp(ctx, key, "move", s, false, map[string]any{"src": s, "dst": d, "overwrite": overwrite})
	return err
}

// FileList is a listing of files in a session.
type FileList struct {
	Path    string     // the folder listed, or the pattern
	Entries []FileInfo // sorted by path, depth first
	// Truncated says the listing stopped at its limit: there is more.
	Truncated bool
}

// ListOptions shape ListFiles and Glob.
type ListOptions struct {
	// Recursive lists the folder's subfolders too (ListFiles; links to
	// folders are listed, not entered).
	Recursive bool
	// Limit is the most entries returned; 0 means DefaultListLimit, and
	// more than MaxListLimit is MaxListLimit.
	Limit int
}

// Limits of a listing.
const (
	DefaultListLimit = 10000
	MaxListLimit     = 1000000
	// globVisitFactor bounds the entries Glob looks at, as a multiple of
	// its limit: a pattern under a huge tree ends, truncated.
	globVisitFactor = 100
)

func (o ListOptions) limit() int {
	switch {
	case o.Limit <= 0:
		return DefaultListLimit
	case o.Limit > MaxListLimit:
		return MaxListLimit
	}
	return o.Limit
}

// ListFiles lists the folder dir in the session (following dir itself if
// it is a link to a folder): each entry's path, type, size, mode and
// modification time, optionally recursively. A subfolder the sandbox user
// cannot read is left out; dir itself unreadable is ErrPermission, a file
// ErrNotDir.
func (m *Manager) ListFiles(ctx context.Context, key, dir string, opts ListOptions) (*FileList, error) {
	p, err := cleanPath(dir)
	if err != nil {
		return nil, &FileError{Op: "list", Key: key, Path: dir, Err: err}
	}
	return m.listing(ctx, key, "list", p, map[string]any{"path": p, "recursive": opts.Recursive, "limit": opts.limit()})
}

// Glob lists the files and folders in the session whose paths match
// pattern: path.Match syntax per element (*, ?, [a-z]; a leading dot is
// matched like any other character), and ** for any number of folders
// (/session/**/*.csv). A relative pattern is taken from /session. Links
// are matched, never entered.
func (m *Manager) Glob(ctx context.Context, key, pattern string, opts ListOptions) (*FileList, error) {
	p, err := cleanPath(pattern)
	if err == nil {
		for _, el := range splitPath(p) {
			if _, merr := path.Match(el, ""); merr != nil {
				err = fmt.Errorf("%w: bad pattern element %q: %w", ErrBadPath, el, merr)
				break
			}
		}
	}
	if err != nil {
		return nil, &FileError{Op: "glob", Key: key, Path: pattern, Err: err}
	}
	limit := opts.limit()
	return m.listing(ctx, key, "glob", p, map[string]any{"pattern": p, "limit": limit, "visit": limit * globVisitFactor})
}

func splitPath(p string) []string {
	return slices.DeleteFunc(strings.Split(p, "/"), func(s string) bool { return s == "" })
}

func (m *Manager) listing(ctx context.Context, key, op, p string, req map[string]any) (list *FileList, err error) {
	ctx, span := m.fileSpan(ctx, op, key, p)
	defer func() {
		if list != nil {
			span.SetAttributes(AttrFiles.Int(len(list.Entries)))
		}
		endSpan(span, err)
	}()
	fail := func(err error) (*FileList, error) {
		return nil, &FileError{Op: op, Key: key, Path: p, Err: err}
	}
	if err := m.begin(); err != nil {
		return fail(err)
	}
	defer m.calls.Done()
	e, err := m.fileSession(ctx, key, false)
	if err != nil {
		return fail(err)
	}
	h, err := m.startHelper(ctx, e, op, req, nil)
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	list = &FileList{Path: p}
	for {
		var r helperReply
		if err := h.next(ctx, &r); err != nil {
			return fail(err)
		}
		switch {
		case r.Error != nil:
			h.whole()
			return fail(r.Error.err())
		case r.Done:
			h.whole()
			list.Truncated = r.Truncated
			return list, nil
		}
		list.Entries = append(list.Entries, r.wireInfo.info())
	}
}

// FileReader streams a file out of a session: Read returns its bytes, from
// Info.Offset, Info.Length of them; Close ends the stream early.
type FileReader struct {
	// Info describes the file as it was opened.
	Info FileInfo
	// Offset and Length are the part of the file read.
	Offset, Length int64

	h    *helperCall
	left int64
	err  error
	key  string
	done func()
}

// Read reads the file's bytes. A file that shrank while it was read ends
// with io.ErrUnexpectedEOF rather than passing for whole.
func (r *FileReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.left == 0 {
		r.err = io.EOF
		r.finish()
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.h.r.Read(p)
	r.left -= int64(n)
	if err == io.EOF && r.left > 0 {
		err = &FileError{Op: "read", Key: r.key, Path: r.Info.Path,
			Err: fmt.Errorf("the stream ended %d bytes short (the file shrank while read?): %w", r.left, io.ErrUnexpectedEOF)}
	}
	if err != nil {
		r.err = err
		r.finish()
	}
	return n, err
}

// WriteTo copies the file's bytes to w in large blocks (io.Copy uses it):
// the stream carries hundreds of MiB a second, which small reads waste.
func (r *FileReader) WriteTo(w io.Writer) (int64, error) {
	// Sized to what is left: a small file costs no MiB to clear.
	buf := make([]byte, max(min(r.left, 1<<20), 1))
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// Close ends the stream; reading the file to its end closes it too.
func (r *FileReader) Close() error {
	r.finish()
	if r.err == nil {
		r.err = fs.ErrClosed
	}
	return nil
}

func (r *FileReader) finish() {
	if r.done != nil {
		if r.left == 0 && (r.err == nil || r.err == io.EOF) {
			r.h.whole()
		}
		r.h.Close()
		r.done()
		r.done = nil
	}
}

// ReadFile opens the regular file at path in the session for reading,
// streamed: from offset, length bytes (length < 0: to the end; past the end
// is cut to it). A part larger than FILES_MAX_FILE_MB is ErrFileTooLarge
// (read it in parts); a folder ErrIsDir; a named pipe, socket or device
// ErrNotRegular, at once, never blocking. Close the reader when done; until
// then the stream holds the call open (the Manager's Close waits for it).
func (m *Manager) ReadFile(ctx context.Context, key, path string, offset, length int64) (fr *FileReader, err error) {
	ctx, span := m.fileSpan(ctx, "read", key, path)
	defer func() {
		if fr != nil {
			span.SetAttributes(AttrBytes.Int64(fr.Length))
		}
		endSpan(span, err)
	}()
	p, err := cleanPath(path)
	if err == nil && offset < 0 {
		err = fmt.Errorf("%w: offset %d is negative", ErrBadPath, offset)
	}
	if err != nil {
		return nil, &FileError{Op: "read", Key: key, Path: path, Err: err}
	}
	fail := func(err error) (*FileReader, error) {
		return nil, &FileError{Op: "read", Key: key, Path: p, Err: err}
	}
	if err := m.begin(); err != nil {
		return fail(err)
	}
	ok := false
	defer func() {
		if !ok {
			m.calls.Done()
		}
	}()
	e, err := m.fileSession(ctx, key, false)
	if err != nil {
		return fail(err)
	}
	h, err := m.startHelper(ctx, e, "read", map[string]any{"path": p, "offset": offset, "length": length, "max": m.maxFile()}, nil)
	if err != nil {
		return fail(err)
	}
	var r helperReply
	if err := h.next(ctx, &r); err != nil {
		h.Close()
		return fail(err)
	}
	if r.Error != nil {
		h.whole()
		h.Close()
		err := r.Error.err()
		if errors.Is(err, ErrFileTooLarge) {
			err = fmt.Errorf("%w: over the cap of %s (FILES_MAX_FILE_MB); read it in parts with an offset and a length", err, byteSize(m.maxFile()))
		}
		return fail(err)
	}
	if r.Info == nil {
		h.Close()
		return fail(errors.New("the file helper sent no description"))
	}
	ok = true
	return &FileReader{Info: r.Info.info(), Offset: r.Info.Offset, Length: r.Info.Length,
		h: h, left: r.Info.Length, key: key, done: m.calls.Done}, nil
}

func (m *Manager) maxFile() int64 { return int64(m.cfg.FilesMaxFileMB) << 20 }
func (m *Manager) maxCall() int64 { return int64(m.cfg.FilesMaxCallMB) << 20 }

// byteSize says n in the largest binary unit it fills.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// FileWrite is one file for WriteFiles.
type FileWrite struct {
	// Path is where the file goes in the sandbox; a relative path is
	// taken from /session. Missing parent folders are made.
	Path string
	// Mode is the file's permission bits; 0 means 0644.
	Mode fs.FileMode
	// Data is the content, read once, streamed; nil is an empty file.
	// When it reports its size (Size() int64 or Len() int, as
	// bytes.Reader, strings.Reader and *os.File do), a file over the cap
	// is refused before a byte is sent.
	Data io.Reader
}

// WriteResult says how one file of a WriteFiles call went.
type WriteResult struct {
	Path string // the sandbox path, cleaned
	Size int64  // bytes written
	Err  error  // nil when written; a *FileError otherwise

	answered bool // the helper said how it went
}

// chunkSize is the most bytes of one frame of a written file.
const chunkSize = 1 << 20

// abortChunk ends a file that must not be kept.
const abortChunk = 0xFFFFFFFF

// WriteFiles writes files into the session, in one helper call, each
// atomically (code never sees half a file; whatever was at the path, a
// link or a named pipe too, is replaced, never followed; a folder there is
// ErrIsDir), as the sandbox user: a path the sandbox user may not write is
// ErrPermission, a full /session ErrNoSpace. Each file's result is in the
// returned slice, in order; a file over FILES_MAX_FILE_MB, or past
// FILES_MAX_CALL_MB for the whole call, is ErrFileTooLarge and not kept.
// The error is the call's own (engine, session, context): then the
// results say how far it went. The session is started if needed.
func (m *Manager) WriteFiles(ctx context.Context, key string, files []FileWrite) ([]WriteResult, error) {
	return m.WriteFileSeq(ctx, key, slices.Values(files))
}

// WriteFileSeq is WriteFiles for files that come one at a time, such as
// the entries of a tar stream: each file's Data is read to its end before
// the next file is asked for. A session is started when the first file
// that can be written comes.
func (m *Manager) WriteFileSeq(ctx context.Context, key string, files iter.Seq[FileWrite]) ([]WriteResult, error) {
	return m.writeFileSeq(ctx, key, files, nil)
}

// writeFileSeq is WriteFileSeq; with verdict set, the call is all or
// nothing (see WriteFileSeqAll).
func (m *Manager) writeFileSeq(ctx context.Context, key string, files iter.Seq[FileWrite], verdict func() error) (_ []WriteResult, err error) {
	var results []WriteResult
	ctx, span := m.startSpan(ctx, SpanFilePrefix+"write", key)
	defer func() {
		var n int64
		serr := err
		for _, r := range results {
			n += r.Size
			if r.Err != nil && serr == nil {
				serr = r.Err // a file that failed fails the span, not the call
			}
		}
		if len(results) == 1 {
			span.SetAttributes(AttrPath.String(results[0].Path))
		}
		span.SetAttributes(AttrFiles.Int(len(results)), AttrBytes.Int64(n))
		endSpan(span, serr)
	}()
	fileErr := func(i int, err error) {
		results[i].Err = &FileError{Op: "write", Key: key, Path: results[i].Path, Err: err}
	}
	callErr := func(err error) ([]WriteResult, error) {
		for i := range results {
			if results[i].Err == nil && results[i].Size == 0 && !results[i].answered {
				fileErr(i, fmt.Errorf("not written: %w", err))
			}
		}
		return results, &Error{Op: "write files", Key: key, Err: err}
	}
	if err := m.begin(); err != nil {
		return callErr(err)
	}
	defer m.calls.Done()

	var h *helperCall
	answers := make(chan writeAnswer, 64)
	start := func(body []byte) error {
		e, err := m.fileSession(ctx, key, true)
		if err != nil {
			return err
		}
		if h, err = m.startHelper(ctx, e, "write", map[string]bool{"all": verdict != nil}, body); err != nil {
			return err
		}
		// The helper's answers are read as they come, so that neither
		// side waits on a full pipe.
		go func() {
			defer close(answers)
			for {
				var a writeAnswer
				a.err = h.next(ctx, &a.r)
				if a.err == nil && a.r.Done {
					h.whole()
				}
				select {
				case answers <- a:
				case <-h.closed:
					return
				}
				if a.err != nil || a.r.Done {
					return
				}
			}
		}()
		return nil
	}
	defer func() {
		if h != nil {
			h.Close()
		}
	}()

	var ours []error // why the host aborted a file
	var headed []int // files whose header went out: one answer each, in order
	got := 0         // answers taken
	var total int64  // bytes of the call
	var werr error   // the stream to the helper failed
	buf := m.chunks.get()
	defer m.chunks.put(buf)
	// What the call sends is held until it outgrows one message: a call
	// that fits goes whole, in one round trip (callInWindow).
	var startErr error
	out := &heldCall{open: func(held []byte) (io.Writer, error) {
		// The call streams: it goes first, the files after it.
		if startErr = start(nil); startErr != nil {
			return nil, startErr
		}
		if _, err := h.s.Write(held); err != nil {
			h.Close()
			startErr = fmt.Errorf("send the files to the file helper: %w", err)
			return nil, startErr
		}
		return h.s, nil
	}}
	take := func(a writeAnswer) bool {
		if a.err != nil {
			if werr == nil || ctx.Err() != nil {
				werr = a.err
			}
			return false
		}
		if a.r.Done || got == len(headed) {
			return false
		}
		i := headed[got]
		got++
		results[i].answered = true
		switch {
		case ours[i] != nil:
			fileErr(i, ours[i])
		case a.r.Error != nil:
			fileErr(i, a.r.Error.err())
		case a.r.Aborted:
			fileErr(i, errors.New("aborted"))
		default:
			results[i].Size = a.r.Size
		}
		return true
	}
	for f := range files {
		i := len(results)
		results = append(results, WriteResult{Path: f.Path})
		ours = append(ours, nil)
		if werr != nil {
			continue // listed, as not written
		}
		p, err := cleanPath(f.Path)
		if err == nil && mountPoints[p] {
			err = fmt.Errorf("%w: %s is a mount point", ErrBadPath, p)
		}
		if err != nil {
			fileErr(i, err)
			continue
		}
		results[i].Path = p
		if n, ok := sizeOf(f.Data); ok && n > m.maxFile() {
			fileErr(i, fmt.Errorf("%w: %s, over the cap of %s (FILES_MAX_FILE_MB)", ErrFileTooLarge, byteSize(n), byteSize(m.maxFile())))
			continue
		}
		if total >= m.maxCall() {
			fileErr(i, fmt.Errorf("%w: the call is over its cap of %s (FILES_MAX_CALL_MB)", ErrFileTooLarge, byteSize(m.maxCall())))
			continue
		}
		mode := f.Mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		if mode == 0 {
			mode = 0o644
		}
		head, _ := json.Marshal(map[string]any{"path": p, "mode": unixMode(mode)})
		if _, werr = out.Write(append(head, '\n')); werr != nil {
			if startErr != nil {
				return callErr(startErr)
			}
			continue
		}
		headed = append(headed, i)
		var sent int64
		ours[i], werr = m.sendFile(out, f.Data, buf, &sent, &total)
		if startErr != nil {
			return callErr(startErr)
		}
		// Take the answers that are in, so that they never pile up.
		for drained := false; !drained; {
			select {
			case a, ok := <-answers:
				drained = !ok || !take(a)
			default:
				drained = true
			}
		}
	}
	if !out.opened() && len(out.buf) == 0 { // no file went out
		if verdict != nil {
			refuseAll(results, verdict())
		}
		return results, nil
	}
	committing := false
	inline := !out.opened()
	if inline {
		// The whole call is held: it goes in one piece, and its commit
		// with it, which the helper makes only if every file of the call
		// was written (the host cannot wait for their answers first).
		if verdict != nil {
			why := verdict()
			for i := range results {
				if why == nil && results[i].Err != nil {
					why = results[i].Err
				}
				if why == nil && ours[i] != nil {
					why = ours[i]
				}
			}
			if why != nil {
				refuseAll(results, why) // nothing was sent: nothing stays
				return results, nil
			}
			out.buf = append(out.buf, "{\"commit\": true, \"whole\": true}\n"...)
			committing = true
		}
		out.buf = append(out.buf, "{\"end\": true}\n"...)
		if err := start(out.buf); err != nil {
			return callErr(err)
		}
	}
	if verdict != nil && werr == nil && !inline {
		// Every file's answer first: the commit depends on them all.
		for got < len(headed) {
			a, ok := <-answers
			if !ok || !take(a) {
				break
			}
		}
		why := verdict()
		for i := range results {
			if why == nil && results[i].Err != nil {
				why = results[i].Err
			}
		}
		switch {
		case why != nil:
			refuseAll(results, why) // the stream ends without a commit: nothing stays
		case got == len(headed):
			_, werr = h.s.Write([]byte("{\"commit\": true}\n"))
			committing = werr == nil
		}
	}
	if werr == nil && !inline {
		werr = h.endInput()
	}
	for got < len(headed) {
		a, ok := <-answers
		if !ok || !take(a) {
			break
		}
	}
	if werr == nil && got < len(headed) {
		werr = errors.New("the file helper stopped answering")
	}
	if committing && werr == nil {
		werr = m.committed(answers, results, fileErr, inline)
	}
	if werr == nil {
		h.awaitEnd(answers)
	}
	if werr != nil {
		if verdict != nil && !committing {
			refuseAll(results, werr)
		}
		return callErr(fmt.Errorf("stream files to the sandbox: %w", werr))
	}
	return results, nil
}

// chunkPool keeps the buffers writes frame their chunks in: one each is a
// MiB to clear, per call, which a small write would pay for nothing.
type chunkPool struct{ p sync.Pool }

func (c *chunkPool) get() []byte {
	if b, ok := c.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 4+chunkSize)
}

func (c *chunkPool) put(b []byte) { c.p.Put(&b) }

// maxHeld bounds what a write holds to send whole, with its call.
const maxHeld = 64 << 10

// heldCall is what a write sends to the helper: held until it outgrows
// maxHeld, then sent on as it comes through the stream open returns (it
// starts the helper and sends what was held).
type heldCall struct {
	buf  []byte
	w    io.Writer
	open func(held []byte) (io.Writer, error)
}

func (c *heldCall) opened() bool { return c.w != nil }

func (c *heldCall) Write(p []byte) (int, error) {
	if c.w != nil {
		return c.w.Write(p)
	}
	if len(c.buf)+len(p) <= maxHeld {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	w, err := c.open(c.buf)
	if err != nil {
		return 0, err
	}
	c.w, c.buf = w, nil
	return c.w.Write(p)
}

// writeAnswer is one line of the helper's answers to a write, or why none
// came.
type writeAnswer struct {
	r   helperReply
	err error
}

// sendFile streams one file's bytes as frames. Its first result is why the
// host stopped the file (a cap, the reader's error): the file is aborted
// and the call goes on; the second is a failed write to the helper, which
// ends the call.
func (m *Manager) sendFile(w io.Writer, r io.Reader, buf []byte, sent, total *int64) (error, error) {
	end := func(n uint32) error {
		binary.BigEndian.PutUint32(buf[:4], n)
		_, err := w.Write(buf[:4])
		return err
	}
	if r == nil {
		return nil, end(0)
	}
	for {
		room := min(int64(chunkSize), m.maxFile()-*sent+1, m.maxCall()-*total+1)
		n, rerr := io.ReadAtLeast(r, buf[4:4+room], 1)
		if n > 0 {
			if *sent+int64(n) > m.maxFile() {
				return fmt.Errorf("%w: over the cap of %s (FILES_MAX_FILE_MB)", ErrFileTooLarge, byteSize(m.maxFile())), end(abortChunk)
			}
			if *total+int64(n) > m.maxCall() {
				*total = m.maxCall() // the files after this one are refused too
				return fmt.Errorf("%w: the call is over its cap of %s (FILES_MAX_CALL_MB)", ErrFileTooLarge, byteSize(m.maxCall())), end(abortChunk)
			}
			binary.BigEndian.PutUint32(buf[:4], uint32(n))
			if _, err := w.Write(buf[:4+n]); err != nil {
				return nil, err
			}
			*sent += int64(n)
			*total += int64(n)
		}
		switch {
		case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
			return nil, end(0)
		case rerr != nil:
			return fmt.Errorf("read the data: %w", rerr), end(abortChunk)
		}
	}
}

// WriteFile writes one file into the session (see WriteFiles) and returns
// the bytes written; the file's own failure is the error.
func (m *Manager) WriteFile(ctx context.Context, key, path string, data io.Reader, mode fs.FileMode) (int64, error) {
	res, err := m.WriteFiles(ctx, key, []FileWrite{{Path: path, Mode: mode, Data: data}})
	if err != nil {
		return 0, err
	}
	if res[0].Err != nil {
		return 0, res[0].Err
	}
	return res[0].Size, nil
}

// sizeOf returns the bytes r will give, when it says.
func sizeOf(r io.Reader) (int64, bool) {
	switch v := r.(type) {
	case nil:
		return 0, true
	case interface{ Len() int }:
		return int64(v.Len()), true
	case *os.File:
		if fi, err := v.Stat(); err == nil && fi.Mode().IsRegular() {
			off, err := v.Seek(0, io.SeekCurrent)
			if err == nil {
				return fi.Size() - off, true
			}
		}
	case interface{ Size() int64 }:
		return v.Size(), true
	}
	return 0, false
}

// unixMode turns fs.FileMode's special bits into the kernel's.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}
