package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Batch stores many blobs with one flush to disk for all their contents and
// one for all their names, where Put pays a flush or two per blob: a small
// blob costs little to write but a disk cache flush (a millisecond or more)
// to make durable. Puts only write temp files; Commit flushes them all with
// one syncfs, renames them into place, and flushes again. The guarantee is
// Put's: a final name only ever holds complete, durable content; a crash at
// any point leaves at most temp files, which GC removes, and (PackSmall)
// complete packs of committed blobs, which the next Flush or GC places.
//
// A Batch's Puts may run concurrently. A Put still running when Commit or
// Abort starts fails, and leaves nothing behind.
type Batch struct {
	b *Blobstore
	// perFile makes Commit fsync each file and folder instead of calling
	// syncfs: for Blobstore.Put, a batch of one, where syncfs would flush
	// every other writer's data on the file system too, and where syncfs
	// is unavailable. The temp files then stay open until Commit.
	perFile bool
	// packSmall writes blobs of up to packMax bytes into one pack (see
	// PackSmall).
	packSmall bool

	mu      sync.Mutex
	started bool
	done    bool // committed or aborted
	// fsys is a folder of the blobstore, opened before the batch writes
	// anything, for syncfs: the kernel reports a write-back error to syncfs
	// only if it happened after the file it is called on was opened.
	fsys    *os.File
	pending []*tempBlob          // in Put order, one per content
	bySum   map[string]*tempBlob // dedup within the batch
	pack    *packWriter          // small blobs, with packSmall; nil until the first
	inPack  map[string]bool      // dedup within the pack
}

// A BatchOption changes how a Batch stores its blobs.
type BatchOption func(*Batch)

// PackSmall makes the batch write its small blobs (up to 64 KiB) into one
// pack file instead of one file each: Commit then makes them durable with
// one file, and Open serves them from it at once, while the Blobstore places
// each under its final name in the background. Flush waits for that. Use it
// where a caller waits for many small blobs: a thousand 4 KiB files cost a
// few milliseconds this way, against a file and a folder created for each
// otherwise. Ask Open, not Path, for such blobs until Flush returns.
func PackSmall() BatchOption { return func(bt *Batch) { bt.packSmall = true } }

// tempBlob is content a Batch wrote to a temp file and will rename into place.
type tempBlob struct {
	name string   // the temp file
	f    *os.File // still open when Commit fsyncs it (perFile), else nil
	sum  string
	gone bool // renamed into place or removed
}

// discard removes the temp file unless it is gone already.
func (t *tempBlob) discard() {
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
	if !t.gone {
		os.Remove(t.name)
		t.gone = true
	}
}

// errBatchDone is returned by a Batch used after Commit or Abort.
var errBatchDone = errors.New("batch already committed or aborted")

// NewBatch returns an empty Batch. It does no I/O until the first Put.
// Commit or Abort it: its temp files stay in dir/tmp until then (or until GC
// finds them older than Grace).
func (b *Blobstore) NewBatch(opts ...BatchOption) *Batch {
	bt := b.newBatch(!syncfsAvailable())
	for _, o := range opts {
		o(bt)
	}
	return bt
}

func (b *Blobstore) newBatch(perFile bool) *Batch {
	return &Batch{b: b, perFile: perFile, bySum: map[string]*tempBlob{}, inPack: map[string]bool{}}
}

// Put streams r into a temp file, hashing as it goes, and returns the
// content's SHA-256 (lowercase hex) and size. It reads at most max+1 bytes of
// r when max > 0 and returns a *TooLargeError when there are more; unlike
// PutLimit, a max of 0 (or less) means no limit. Nothing is visible under a
// final name until Commit. On error, including a failing r or a done ctx,
// this Put leaves nothing behind and the batch's other blobs are unaffected.
func (bt *Batch) Put(ctx context.Context, r io.Reader, max int64) (sha256 string, size int64, err error) {
	if max <= 0 {
		max = -1
	}
	return bt.put(ctx, r, max)
}

// put is Put with PutLimit's max: negative for no limit.
func (bt *Batch) put(ctx context.Context, r io.Reader, max int64) (sum string, size int64, err error) {
	if err := bt.start(); err != nil {
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	if bt.packSmall {
		head := heads.Get().(*bytes.Buffer)
		defer func() { head.Reset(); heads.Put(head) }()
		limit := int64(packMax)
		if max >= 0 {
			limit = min(limit, max)
		}
		ended, err := readHead(r, head, limit)
		switch {
		case err != nil:
			return "", 0, fmt.Errorf("put blob: read content: %w", err)
		case ended:
			return bt.putPacked(ctx, head.Bytes())
		case limit == max:
			return "", 0, fmt.Errorf("put blob: %w", &TooLargeError{Size: max + 1, Max: max})
		}
		r = io.MultiReader(bytes.NewReader(head.Bytes()), r)
	}
	t, size, err := bt.b.writeTemp(ctx, r, max, bt.perFile)
	if err != nil {
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.done {
		t.discard()
		return "", 0, fmt.Errorf("put blob: %w", errBatchDone)
	}
	if _, dup := bt.bySum[t.sum]; dup {
		t.discard() // the batch holds this content already
		return t.sum, size, nil
	}
	bt.bySum[t.sum] = t
	bt.pending = append(bt.pending, t)
	return t.sum, size, nil
}

// heads holds the buffers PackSmall batches read small contents into.
var heads = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putPacked adds a whole small content to the batch's pack.
func (bt *Batch) putPacked(ctx context.Context, content []byte) (string, int64, error) {
	if err := ctx.Err(); err != nil {
		return "", 0, fmt.Errorf("put blob: %w", context.Cause(ctx))
	}
	h := sha256.Sum256(content)
	sum, size := hex.EncodeToString(h[:]), int64(len(content))
	bt.mu.Lock()
	defer bt.mu.Unlock()
	switch {
	case bt.done:
		return "", 0, fmt.Errorf("put blob: %w", errBatchDone)
	case bt.inPack[sum]:
		return sum, size, nil // the pack holds this content already
	}
	if bt.pack == nil {
		f, err := os.CreateTemp(filepath.Join(bt.b.dir, tmpDir), packPrefix+"*")
		if err != nil {
			return "", 0, fmt.Errorf("put blob: %w", err)
		}
		bt.pack = newPackWriter(f)
	}
	if err := bt.pack.add(sum, content); err != nil {
		// The pack's tail may hold part of this content: harmless, since
		// only what the table lists is ever read.
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	bt.inPack[sum] = true
	return sum, size, nil
}

// start prepares the temp folder, and the file for syncfs, on the first Put.
func (bt *Batch) start() error {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.done {
		return errBatchDone
	}
	if bt.started {
		return nil
	}
	tmp := filepath.Join(bt.b.dir, tmpDir)
	if err := mkdirAllSync(tmp); err != nil {
		return err
	}
	if bt.packSmall {
		if err := mkdirAllSync(filepath.Join(bt.b.dir, pendingDir)); err != nil {
			return err
		}
	}
	if !bt.perFile {
		f, err := os.Open(tmp)
		if err != nil {
			return err
		}
		bt.fsys = f
	}
	bt.started = true
	return nil
}

// writeTemp writes the content r yields, at most max bytes when max >= 0, to
// a new read-only temp file and hashes it on the way. The file stays open
// when keepOpen is set. On error it removes the file.
func (b *Blobstore) writeTemp(ctx context.Context, r io.Reader, max int64, keepOpen bool) (t *tempBlob, size int64, err error) {
	f, err := os.CreateTemp(filepath.Join(b.dir, tmpDir), putPrefix+"*")
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil || !keepOpen {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()

	if max >= 0 {
		r = io.LimitReader(r, max+1) // one byte more tells "too large" from "exactly max"
	}
	h := sha256.New()
	bufp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bufp)
	buf := *bufp
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, context.Cause(ctx)
		}
		n, rerr := r.Read(buf)
		if n > 0 {
			h.Write(buf[:n]) // never fails
			if _, err := f.Write(buf[:n]); err != nil {
				return nil, 0, err
			}
			size += int64(n)
			if max >= 0 && size > max {
				return nil, 0, &TooLargeError{Size: size, Max: max}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, 0, fmt.Errorf("read content: %w", rerr)
		}
	}
	// Blobs are never modified: the mode is set before the file has a final
	// name, and made durable with its content.
	if err := f.Chmod(blobMode); err != nil {
		return nil, 0, err
	}
	t = &tempBlob{name: f.Name(), sum: hex.EncodeToString(h.Sum(nil))}
	if keepOpen {
		t.f = f
	}
	return t, size, nil
}

// Commit makes the batch's blobs durable under their final names: one
// syncfs flushes every temp file (or, where syncfs is unavailable, each is
// fsynced), then each is renamed into place and a second syncfs (or an fsync
// of each folder touched, once) makes the names durable. syncfs also flushes
// whatever else is waiting to be written on the file system, which Commit
// then waits for. Content stored already is not written again: like Put,
// Commit refreshes the existing blob's modification time and drops the copy.
// Every blob Commit places or deduplicates gets a fresh modification time, so
// GC spares it for Grace from Commit on: add the index rows within that time.
//
// Commit must come within Grace of the batch's Puts, or GC may have removed
// their temp files (Commit then fails). ctx is checked before anything
// changes; once it has begun, Commit finishes. On error, no blob of the batch
// may be relied on: those already renamed are unreferenced blobs GC will
// collect. Either way the batch's temp files are gone when Commit returns,
// and the batch cannot be used again.
func (bt *Batch) Commit(ctx context.Context) error {
	bt.mu.Lock()
	if bt.done {
		bt.mu.Unlock()
		return fmt.Errorf("commit blobs: %w", errBatchDone)
	}
	bt.done = true
	pending, fsys, pack := bt.pending, bt.fsys, bt.pack
	bt.pending, bt.bySum, bt.fsys, bt.pack = nil, nil, nil, nil
	bt.mu.Unlock()

	// Whatever is not in place or pending when Commit returns is removed.
	packed := false
	defer func() {
		for _, t := range pending {
			t.discard()
		}
		if fsys != nil {
			fsys.Close()
		}
		if pack != nil {
			pack.f.Close()
			if !packed {
				os.Remove(pack.f.Name())
			}
		}
	}()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit blobs: %w", context.Cause(ctx))
	}

	// Set apart what is stored already, and prepare the rest, making every
	// change before the flush that makes them all durable.
	now := time.Now()
	var place []*tempBlob
	var dirs []string // to fsync after the renames (perFile only), each once
	seen := map[string]bool{}
	for _, t := range pending {
		final := bt.b.path(t.sum)
		// If GC removed the existing blob meanwhile, the touch fails and
		// the copy goes in instead.
		if err := os.Chtimes(final, now, now); err == nil {
			t.discard()
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("put blob %s: %w", t.sum, err)
		}
		// The blob would keep the temp file's time, the Put's, which may be
		// nearly Grace old: Commit's keeps GC away for a full Grace. A
		// failure here is most likely GC having removed a temp file older
		// than Grace.
		if err := os.Chtimes(t.name, now, now); err != nil {
			return fmt.Errorf("put blob %s: %w", t.sum, err)
		}
		parents, err := mkdirAll(filepath.Dir(final))
		if err != nil {
			return fmt.Errorf("put blob %s: %w", t.sum, err)
		}
		for _, d := range append([]string{filepath.Dir(final)}, parents...) {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
		place = append(place, t)
	}
	// The pack keeps the blobs that are not stored already.
	var keep []packEntry
	if pack != nil {
		for _, e := range pack.entries {
			if err := os.Chtimes(bt.b.path(e.sum), now, now); err == nil {
				continue
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("put blob %s: %w", e.sum, err)
			}
			keep = append(keep, e)
		}
		if len(keep) > 0 {
			if err := pack.finish(keep); err != nil {
				return fmt.Errorf("commit blobs: %w", err)
			}
		}
	}

	// A touch needs no flush: it only matters until the rows are added, and
	// a row keeps its blob without it.
	if len(place) == 0 && len(keep) == 0 {
		return nil
	}

	// The contents, their modes and times and the new folders are durable
	// before any has a final name. Every change is made before the flush:
	// on a journalling file system the first fsync commits them all, and the
	// fsyncs after it find little left to do.
	if bt.perFile {
		for _, t := range place {
			err := t.f.Sync()
			if cerr := t.f.Close(); err == nil {
				err = cerr
			}
			t.f = nil
			if err != nil {
				return fmt.Errorf("put blob %s: %w", t.sum, err)
			}
		}
		if len(keep) > 0 {
			if err := pack.f.Sync(); err != nil {
				return fmt.Errorf("commit blobs: %w", err)
			}
		}
	} else if err := syncfs(fsys); err != nil {
		return fmt.Errorf("commit blobs: %w", err)
	}

	// A concurrent Put or batch of the same content may rename first:
	// replacing its file with identical bytes is harmless, and rename is
	// atomic.
	for _, t := range place {
		if err := os.Rename(t.name, bt.b.path(t.sum)); err != nil {
			return fmt.Errorf("put blob %s: %w", t.sum, err)
		}
		t.gone = true
	}
	var packName string
	if len(keep) > 0 {
		packName = filepath.Base(pack.f.Name())
		if err := os.Rename(pack.f.Name(), filepath.Join(bt.b.dir, pendingDir, packName)); err != nil {
			return fmt.Errorf("commit blobs: %w", err)
		}
		packed = true
		dirs = append(dirs, filepath.Join(bt.b.dir, pendingDir))
	}

	// The names are durable. A second syncfs rather than an fsync per folder:
	// each such fsync can cost a disk cache flush, as much as the syncfs, and
	// a batch of small blobs touches about as many folders as blobs.
	if bt.perFile {
		for _, d := range dirs {
			if err := syncDir(d); err != nil {
				return fmt.Errorf("commit blobs: %w", err)
			}
		}
	} else if err := syncfs(fsys); err != nil {
		return fmt.Errorf("commit blobs: %w", err)
	}
	if packed {
		bt.b.placeLater(packName)
	}
	return nil
}

// Abort removes the batch's temp files. It is a no-op after Commit or Abort.
func (bt *Batch) Abort() {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.done {
		return
	}
	bt.done = true
	for _, t := range bt.pending {
		t.discard()
	}
	if bt.fsys != nil {
		bt.fsys.Close()
	}
	if bt.pack != nil {
		bt.pack.f.Close()
		os.Remove(bt.pack.f.Name())
	}
	bt.pending, bt.bySum, bt.fsys, bt.pack = nil, nil, nil, nil
}
