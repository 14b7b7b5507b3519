package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// DefaultGrace is the default Blobstore.Grace: an hour.
const DefaultGrace = time.Hour

// ErrInvalidSHA256 means a blob name is not 64 lowercase hex digits. Checking
// the form before it becomes a path keeps names like "../../etc/passwd" out
// of the file system.
var ErrInvalidSHA256 = errors.New("invalid sha256: want 64 lowercase hex digits")

// TooLargeError is returned by PutLimit when the content exceeds the limit.
type TooLargeError struct {
	Size int64 // bytes read before stopping: Max+1, a lower bound of the real size
	Max  int64 // the limit, in bytes
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("artifact too large: at least %d bytes, limit %d", e.Size, e.Max)
}

// Blobstore keeps file contents by SHA-256 under a directory, as
// dir/ab/cd/<sha256> for a hash starting "abcd", so identical content is
// stored once. Blobs are written to dir/tmp first and renamed into place
// once durable: a final name only ever holds complete content, whatever
// crashes. Put stores one blob; a Batch stores many, flushing to disk for all
// of them at once, and with PackSmall keeps small ones in one pack file under
// dir/pending until they are placed (Flush). A Blobstore is safe for concurrent use by many goroutines
// and by other processes sharing the directory.
type Blobstore struct {
	// Grace is how long GC spares a blob after Put or Batch.Commit last
	// stored or deduplicated it, and a temp file after it was last written;
	// default DefaultGrace. An ingestion must add the index row within Grace
	// of its Put or Commit, and Commit a Batch within Grace of its Puts.
	Grace time.Duration

	// Logger, when set, logs the placements of packed blobs that fail in
	// the background (PackSmall); the next Flush tries them again.
	Logger *slog.Logger

	dir string

	// gcHook, when set by a test, runs in GC between deciding to collect a
	// blob and moving it away, to stage a concurrent Put.
	gcHook func(sha string)

	packs packs
}

// tmpDir is the folder under the blobstore's directory for temp files, on
// the same file system as the blobs so that rename is atomic.
const tmpDir = "tmp"

// Temp file name prefixes in tmpDir: content being written by Put or waiting
// in a Batch for its Commit, and blobs GC moved away and is about to delete.
const (
	putPrefix = "put-"
	gcPrefix  = "gc-"
)

// Modes of what the Blobstore creates: blobs are never modified, and their
// content is the sessions' data, so nothing is readable by others.
const (
	dirMode  = 0o750
	blobMode = 0o440
)

// NewBlobstore returns a Blobstore keeping its blobs under dir. It does no
// I/O: the directory is created by the first Put.
func NewBlobstore(dir string) *Blobstore {
	return &Blobstore{dir: filepath.Clean(dir)}
}

// Dir returns the directory the Blobstore keeps its blobs in.
func (b *Blobstore) Dir() string { return b.dir }

func (b *Blobstore) grace() time.Duration {
	if b.Grace > 0 {
		return b.Grace
	}
	return DefaultGrace
}

// Put stores the content r yields and returns its SHA-256 (lowercase hex) and
// size. It reads r once, hashing while it writes a temp file, so memory use
// does not grow with the content. When the blob exists already, Put only
// refreshes its modification time (which GC reads) and drops the copy. On
// error, including a failing r or a done ctx, nothing is left under a final
// name and the temp file is removed.
func (b *Blobstore) Put(ctx context.Context, r io.Reader) (sha256 string, size int64, err error) {
	return b.put(ctx, r, -1)
}

// PutLimit is Put for content of at most max bytes. It reads at most max+1
// bytes of r and returns a *TooLargeError when there are more; a negative
// max means no limit.
func (b *Blobstore) PutLimit(ctx context.Context, r io.Reader, max int64) (sha256 string, size int64, err error) {
	return b.put(ctx, r, max)
}

// copyBufs holds the copy buffers of Put and Batch.Put. A large buffer keeps
// the number of read and write system calls low for big files: the hash, not
// the calls, should bound the rate.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// put is a batch of one. Its Commit fsyncs the file and its folders rather
// than calling syncfs, which would flush every other writer's data on the
// file system too.
func (b *Blobstore) put(ctx context.Context, r io.Reader, max int64) (sum string, size int64, err error) {
	bt := b.newBatch(true)
	defer bt.Abort() // no-op after Commit
	if sum, size, err = bt.put(ctx, r, max); err != nil {
		return "", 0, err
	}
	if err := bt.Commit(ctx); err != nil {
		return "", 0, err
	}
	return sum, size, nil
}

// Open opens the blob for reading: its file (an *os.File) or, while a
// PackSmall batch's blob waits to be placed, its part of a pending pack. It
// returns an error wrapping ErrBlobMissing when there is none, and
// ErrInvalidSHA256 for a malformed name.
func (b *Blobstore) Open(sha256 string) (io.ReadSeekCloser, error) {
	if !validSHA256(sha256) {
		return nil, fmt.Errorf("open blob %q: %w", sha256, ErrInvalidSHA256)
	}
	// Placing a blob names it before it removes its pack, so a blob in
	// neither place when its name is looked at again is truly missing.
	f, err := os.Open(b.path(sha256))
	if errors.Is(err, fs.ErrNotExist) {
		var r io.ReadSeekCloser
		if r, err = b.openPacked(sha256); err != nil {
			return nil, fmt.Errorf("open blob %s: %w", sha256, err)
		}
		if r != nil {
			return r, nil
		}
		f, err = os.Open(b.path(sha256))
	}
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open blob %s: %w", sha256, err)
	}
	return nil, fmt.Errorf("open blob %s: %w", sha256, ErrBlobMissing)
}

// Path returns the file name of the blob, whether or not it exists, or an
// error wrapping ErrInvalidSHA256 for a malformed name. A blob a PackSmall
// batch stored has its file only once placed (see Flush).
func (b *Blobstore) Path(sha256 string) (string, error) {
	if !validSHA256(sha256) {
		return "", fmt.Errorf("blob path %q: %w", sha256, ErrInvalidSHA256)
	}
	return b.path(sha256), nil
}

// Remove deletes the blob; a missing blob is no error. It does not check
// whether index rows or a concurrent Put still need the blob: GC does. A
// blob still in a pending pack (PackSmall) is placed again by the next
// Flush: Flush first.
func (b *Blobstore) Remove(sha256 string) error {
	if !validSHA256(sha256) {
		return fmt.Errorf("remove blob %q: %w", sha256, ErrInvalidSHA256)
	}
	if err := os.Remove(b.path(sha256)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove blob %s: %w", sha256, err)
	}
	return nil
}

// path returns the file name of a valid blob name: two levels of folders
// keep each folder small (at most 65 536 folders, few files in each).
func (b *Blobstore) path(sha string) string {
	return filepath.Join(b.dir, sha[0:2], sha[2:4], sha)
}

// validSHA256 reports whether s is 64 lowercase hex digits.
func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if !isHexDigit(s[i]) {
			return false
		}
	}
	return true
}

// isHexDigit reports whether c is a lowercase hex digit.
func isHexDigit(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// mkdirAll is os.MkdirAll that returns the parents of the folders it
// created, deepest first: they must be fsynced for the new folders to
// survive a crash.
func mkdirAll(dir string) (parents []string, err error) {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil, nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if parents, err = mkdirAll(parent); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(dir, dirMode); err != nil {
		if errors.Is(err, fs.ErrExist) { // created concurrently, or not a folder (the caller's next step says)
			return parents, nil
		}
		return nil, err
	}
	return append([]string{parent}, parents...), nil
}

// mkdirAllSync is mkdirAll that fsyncs the parents at once.
func mkdirAllSync(dir string) error {
	parents, err := mkdirAll(dir)
	for _, p := range parents {
		if err != nil {
			break
		}
		err = syncDir(p)
	}
	return err
}

// syncDir fsyncs a folder, making the entries created or renamed in it
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
