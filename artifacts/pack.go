package artifacts

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// A pack is one file holding the contents of many small blobs, so that a
// batch of a thousand small files costs one file and one flush on the path
// its caller waits for, instead of a thousand files and a thousand folders:
// creating a file or a folder costs far more than writing 4 KiB into an open
// one. A batch made with PackSmall writes its small blobs into a pack, makes
// it durable and names it under dir/pending; from then on Open serves those
// blobs from the pack, and the Blobstore places each under its own final
// name in the background, then removes the pack. A pack left by a crash is
// placed by the next Flush or GC; placing is idempotent, so two processes
// placing one pack at once is harmless.
//
// Layout: the blobs' bytes back to back, then a table with one 48-byte entry
// per blob (SHA-256, offset, size; big-endian), then the number of entries
// (8 bytes) and packMagic. A pack is complete before it has a name under
// pending, so a torn one is never read.

const (
	// pendingDir holds the packs whose blobs are not all placed yet.
	pendingDir = "pending"
	// packMax is the largest blob PackSmall puts into a pack.
	packMax = 64 << 10
	// packMagic ends every pack.
	packMagic = "agentbox-pack-1\n"
	// packPrefix starts the temp file of a pack being written (a Put temp
	// file, as far as GC is concerned) and the name of a pending pack.
	packPrefix = putPrefix + "pack-"

	packEntrySize  = sha256Size + 16
	packFooterSize = 8 + len(packMagic)
	sha256Size     = 32
)

// packEntry locates one blob in a pack.
type packEntry struct {
	sum       string // lowercase hex
	off, size int64
}

// packWriter is the pack of a Batch being written.
type packWriter struct {
	f *os.File // in tmp until Commit names it under pending
	// w gathers small contents into large writes: one system call per
	// blob would cost more than the copy.
	w       *bufio.Writer
	off     int64
	entries []packEntry
}

func newPackWriter(f *os.File) *packWriter {
	return &packWriter{f: f, w: bufio.NewWriterSize(f, 1<<20)}
}

// add appends content to the pack. It runs under the batch's lock.
func (p *packWriter) add(sum string, content []byte) error {
	if _, err := p.w.Write(content); err != nil {
		return err
	}
	p.entries = append(p.entries, packEntry{sum, p.off, int64(len(content))})
	p.off += int64(len(content))
	return nil
}

// finish writes the table of the entries to keep and the footer.
func (p *packWriter) finish(keep []packEntry) error {
	table := make([]byte, 0, len(keep)*packEntrySize+packFooterSize)
	for _, e := range keep {
		raw, err := hex.DecodeString(e.sum)
		if err != nil || len(raw) != sha256Size {
			return fmt.Errorf("pack entry %q: %w", e.sum, ErrInvalidSHA256)
		}
		table = append(table, raw...)
		table = binary.BigEndian.AppendUint64(table, uint64(e.off))
		table = binary.BigEndian.AppendUint64(table, uint64(e.size))
	}
	table = binary.BigEndian.AppendUint64(table, uint64(len(keep)))
	table = append(table, packMagic...)
	if _, err := p.w.Write(table); err != nil {
		return err
	}
	if err := p.w.Flush(); err != nil {
		return err
	}
	return p.f.Chmod(blobMode)
}

// ErrCorruptPack means a pending pack's table does not hold together: the
// file was damaged after it was written. Its blobs cannot be placed; the
// pack is left where it is for someone to look at.
var ErrCorruptPack = errors.New("corrupt pack")

// readPackTable reads the table of the pack in f.
func readPackTable(f *os.File) (map[string]packEntry, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size < int64(packFooterSize) {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorruptPack, size)
	}
	footer := make([]byte, packFooterSize)
	if _, err := f.ReadAt(footer, size-int64(packFooterSize)); err != nil {
		return nil, err
	}
	if string(footer[8:]) != packMagic {
		return nil, fmt.Errorf("%w: no footer", ErrCorruptPack)
	}
	n := binary.BigEndian.Uint64(footer[:8])
	tableStart := size - int64(packFooterSize)
	if n > uint64(tableStart)/packEntrySize {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrCorruptPack, n, size)
	}
	tableStart -= int64(n) * packEntrySize
	table := make([]byte, int64(n)*packEntrySize)
	if _, err := f.ReadAt(table, tableStart); err != nil {
		return nil, err
	}
	entries := make(map[string]packEntry, n)
	for raw := range slices.Chunk(table, packEntrySize) {
		e := packEntry{
			sum:  hex.EncodeToString(raw[:sha256Size]),
			off:  int64(binary.BigEndian.Uint64(raw[sha256Size:])),
			size: int64(binary.BigEndian.Uint64(raw[sha256Size+8:])),
		}
		if e.off < 0 || e.size < 0 || e.off > tableStart-e.size {
			return nil, fmt.Errorf("%w: entry %s out of bounds", ErrCorruptPack, e.sum)
		}
		entries[e.sum] = e
	}
	return entries, nil
}

// packs is the Blobstore's knowledge of pending packs: their tables (a pack
// never changes once named, so a table read once stays right) and the
// placements this process runs.
type packs struct {
	mu      sync.Mutex
	tables  map[string]map[string]packEntry // by pack file name
	placing map[string]*placement           // by pack file name, while it runs
	// hold, set by tests, keeps Commit from placing packs in the
	// background: they stay pending, as after a crash.
	hold bool
}

// placement is one pack being placed by this process.
type placement struct {
	done chan struct{} // closed when it ends
	err  error         // set before done is closed
}

// packedBlob is a blob read out of a pack and checked against its name.
type packedBlob struct{ *bytes.Reader }

func (packedBlob) Close() error { return nil }

// openPacked returns the blob if a pending pack holds it; it returns nil,
// nil when none does. A pack whose table cannot be read, or whose copy of
// the blob does not match its name (damaged, see ErrCorruptPack; Flush
// reports it), holds nothing as far as Open goes. The blob is read whole
// and hashed: it is small, and it is served only until it is placed.
func (b *Blobstore) openPacked(sha string) (io.ReadSeekCloser, error) {
	dir := filepath.Join(b.dir, pendingDir)
	names, err := b.pendingPacks()
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		table, err := b.packTable(name)
		if err != nil {
			continue // placed meanwhile, or damaged
		}
		e, ok := table[sha]
		if !ok || e.size > packMax {
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		content := make([]byte, e.size)
		_, err = f.ReadAt(content, e.off)
		f.Close()
		if err != nil {
			return nil, err
		}
		if h := sha256.Sum256(content); hex.EncodeToString(h[:]) != sha {
			continue
		}
		return packedBlob{bytes.NewReader(content)}, nil
	}
	return nil, nil
}

// pendingPacks lists the pending packs' file names and forgets the tables
// of packs that are gone.
func (b *Blobstore) pendingPacks() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(b.dir, pendingDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pending packs: %w", err)
	}
	var names []string
	present := map[string]bool{}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), packPrefix) {
			names = append(names, e.Name())
			present[e.Name()] = true
		}
	}
	b.packs.mu.Lock()
	for name := range b.packs.tables {
		if !present[name] {
			delete(b.packs.tables, name)
		}
	}
	b.packs.mu.Unlock()
	return names, nil
}

// packTable returns the table of a pending pack, read once.
func (b *Blobstore) packTable(name string) (map[string]packEntry, error) {
	b.packs.mu.Lock()
	table, ok := b.packs.tables[name]
	b.packs.mu.Unlock()
	if ok {
		return table, nil
	}
	f, err := os.Open(filepath.Join(b.dir, pendingDir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if table, err = readPackTable(f); err != nil {
		return nil, fmt.Errorf("pack %s: %w", name, err)
	}
	b.packs.mu.Lock()
	if b.packs.tables == nil {
		b.packs.tables = map[string]map[string]packEntry{}
	}
	b.packs.tables[name] = table
	b.packs.mu.Unlock()
	return table, nil
}

// placeLater places a pack Commit just named, in the background. An error
// is logged (Logger) and leaves the pack pending: Open keeps serving its
// blobs, and the next Flush (the session manager's sweep runs one) tries
// again and reports it.
func (b *Blobstore) placeLater(name string) {
	b.packs.mu.Lock()
	hold := b.packs.hold
	b.packs.mu.Unlock()
	if hold {
		return
	}
	if p, mine := b.startPlacing(name); mine {
		go func() {
			b.runPlacing(context.Background(), name, p)
			if p.err != nil && b.Logger != nil {
				b.Logger.Warn("place packed blobs (the next flush tries again)", "err", p.err)
			}
		}()
	}
}

// Flush places the blobs of every pending pack, this process's and any a
// crashed process left, under their final names, and removes the packs,
// waiting for placements already running in the background. A pack that
// cannot be placed stays pending (Open still serves its blobs) and its error
// is returned. When ctx ends, Flush returns its cause; placements it started
// stop and leave their packs pending, those running in the background go on.
func (b *Blobstore) Flush(ctx context.Context) error {
	names, err := b.pendingPacks()
	if err != nil {
		return fmt.Errorf("flush blobs: %w", err)
	}
	var errs []error
	for _, name := range names {
		if err := b.place(ctx, name); err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("flush blobs: %w", err)
	}
	return nil
}

// place places the blobs of one pending pack and removes it, or waits for
// the placement of it this process runs already, and returns its error.
func (b *Blobstore) place(ctx context.Context, name string) error {
	p, mine := b.startPlacing(name)
	if mine {
		b.runPlacing(ctx, name, p)
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// startPlacing registers a placement of the pack, or returns the one
// running; mine says whether the caller must run it (runPlacing).
func (b *Blobstore) startPlacing(name string) (p *placement, mine bool) {
	b.packs.mu.Lock()
	defer b.packs.mu.Unlock()
	if p, ok := b.packs.placing[name]; ok {
		return p, false
	}
	if b.packs.placing == nil {
		b.packs.placing = map[string]*placement{}
	}
	p = &placement{done: make(chan struct{})}
	b.packs.placing[name] = p
	return p, true
}

// runPlacing places the pack and ends the placement p with the outcome.
func (b *Blobstore) runPlacing(ctx context.Context, name string, p *placement) {
	err := b.placePack(ctx, filepath.Join(b.dir, pendingDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // another process placed it
	} else if err != nil {
		err = fmt.Errorf("place pack %s: %w", name, err)
	}
	b.packs.mu.Lock()
	delete(b.packs.placing, name)
	b.packs.mu.Unlock()
	p.err = err
	close(p.done)
}

// placePack copies every blob of the pack at path that is not in place yet
// into a batch of its own, commits it, then removes the pack. Each blob is
// hashed again on the way: a pack damaged on disk places nothing wrong. A
// blob whose bytes do not match its name is left out and reported, and the
// pack stays; the others are placed.
func (b *Blobstore) placePack(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	table, err := readPackTable(f)
	if err != nil {
		return err
	}
	bt := b.newBatch(!syncfsAvailable())
	defer bt.Abort()
	now := time.Now()
	var found []string // folders of blobs in place already
	var bad []error
	for sum, e := range table {
		if err := os.Chtimes(b.path(sum), now, now); err == nil {
			found = append(found, filepath.Dir(b.path(sum)))
			continue
		}
		got, _, err := bt.put(ctx, io.NewSectionReader(f, e.off, e.size), -1)
		if err != nil {
			return err
		}
		if got != sum {
			// Placed under the name of what it holds, which nothing
			// refers to: GC will collect it.
			bad = append(bad, fmt.Errorf("%w: blob %s has content %s", ErrCorruptPack, sum, got))
		}
	}
	if err := bt.Commit(ctx); err != nil {
		return err
	}
	// A blob found in place may have been renamed there by a batch that has
	// not flushed yet: its name must be durable before the pack goes.
	if len(found) > 0 {
		if err := b.syncFolders(found); err != nil {
			return err
		}
	}
	if err := errors.Join(bad...); err != nil {
		return err
	}
	// The blobs are durable under their names: the pack may go. Should the
	// removal be lost in a crash, the next Flush finds every blob in place.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// syncFolders makes the names in the folders durable: one syncfs, or an
// fsync of each folder where syncfs is unavailable.
func (b *Blobstore) syncFolders(dirs []string) error {
	if syncfsAvailable() {
		d, err := os.Open(b.dir)
		if err != nil {
			return err
		}
		defer d.Close()
		return syncfs(d)
	}
	slices.Sort(dirs)
	for _, d := range slices.Compact(dirs) {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// readHead reads r until it ends or max+1 bytes were read, into buf, which
// it grows as needed, and reports whether r ended.
func readHead(r io.Reader, buf *bytes.Buffer, max int64) (ended bool, err error) {
	n, err := buf.ReadFrom(io.LimitReader(r, max+1))
	if err != nil {
		return false, err
	}
	return n <= max, nil
}
