package datasets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/internal/store"
)

// DefaultMaxBytes is the size cap Cache.Get applies when given none: 1 GiB.
const DefaultMaxBytes int64 = 1 << 30

// Cache keeps fetched datasets as blobs in the artifacts Blobstore, with an
// index from dataset id to blob in the agentbox database, so a dataset is
// fetched once however many sessions select it. Concurrent Gets of one id
// in this process share one fetch. It is safe for concurrent use by many
// goroutines and by other processes sharing the blobstore and database (two
// processes may each fetch an id once; identical content is stored once).
//
// The index is keyed by id alone: a dataset fetched for one namespace is
// served to every other without asking the Fetcher again. A source that
// authorizes per namespace needs ids that say which one, or a check before
// Get.
//
// The blobs share the Blobstore with artifacts, so Blobstore.GC must ask the
// Cache too (Cache.Referenced) or it removes datasets after Blobstore.Grace;
// a Get whose blob was removed anyway fetches the dataset again.
type Cache struct {
	blobs *artifacts.Blobstore
	db    *sql.DB

	mu       sync.Mutex
	inflight map[string]*flight
	closed   bool
	wg       sync.WaitGroup // the fetch goroutines
	cancels  map[*flight]context.CancelFunc
}

// flight is one fetch of an id shared by the Gets waiting for it.
type flight struct {
	done    chan struct{} // closed when sha, size and err are set
	waiters int           // Gets still waiting, under Cache.mu
	sha     string
	size    int64
	fetched bool // false when the flight found the id cached after all
	err     error
}

// NewCache returns a Cache storing blobs in blobs and its index in s, whose
// migrations create the tables. It does no I/O.
func NewCache(blobs *artifacts.Blobstore, s *store.Store) *Cache {
	return &Cache{blobs: blobs, db: s.DB(),
		inflight: make(map[string]*flight), cancels: make(map[*flight]context.CancelFunc)}
}

// Get returns the blob holding dataset id: the cached one when the id was
// fetched before (fetched false), else it fetches it with f and stores it
// (fetched true, also for a Get that joined another's fetch). Content over
// maxBytes fails with ErrTooLarge; maxBytes <= 0 means DefaultMaxBytes. An id
// whose name ends in .parquet must hold Parquet (magic "PAR1" at head and
// tail) or it fails with ErrFormat and is not cached.
//
// A fetch runs apart from the Gets that wait for it: when ctx is done, Get
// returns at once, and the fetch is cancelled only when no Get waits for it
// any more. Gets that join a fetch share its outcome, a failure over the
// limit the first Get gave included. A failure of the source or of the content, an invalid id
// (ErrInvalidID) or a done ctx included, is a *FetchError, whose text can be
// the FAILED reason shown to the agent; database errors are not. After
// Close, Get fails with ErrClosed.
func (c *Cache) Get(ctx context.Context, id string, f Fetcher, maxBytes int64) (sha256 string, size int64, fetched bool, err error) {
	if err := checkID(id); err != nil {
		return "", 0, false, &FetchError{ID: id, Err: err}
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return "", 0, false, ErrClosed
	}
	if sha, size, ok, err := c.lookup(ctx, id); err != nil {
		return "", 0, false, err
	} else if ok {
		if size > maxBytes {
			return "", 0, false, &FetchError{ID: id, Err: tooLarge(size, maxBytes)}
		}
		return sha, size, false, nil
	}

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return "", 0, false, ErrClosed
	}
	fl := c.inflight[id]
	if fl == nil {
		// The fetch's context keeps the first caller's values but not its
		// cancellation: later Gets depend on it as much as the first.
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		fl = &flight{done: make(chan struct{})}
		c.inflight[id] = fl
		c.cancels[fl] = cancel
		c.wg.Add(1)
		go c.fetch(fctx, id, f, maxBytes, fl)
	}
	fl.waiters++
	c.mu.Unlock()

	select {
	case <-fl.done:
		c.mu.Lock()
		fl.waiters--
		c.mu.Unlock()
		if fl.err != nil {
			return "", 0, false, fl.err
		}
		if fl.size > maxBytes { // joined a fetch started with a higher limit
			return "", 0, false, &FetchError{ID: id, Err: tooLarge(fl.size, maxBytes)}
		}
		return fl.sha, fl.size, fl.fetched, nil
	case <-ctx.Done():
		c.mu.Lock()
		fl.waiters--
		if fl.waiters == 0 {
			c.abandon(id, fl)
		}
		c.mu.Unlock()
		return "", 0, false, &FetchError{ID: id, Err: context.Cause(ctx)}
	}
}

// abandon cancels a fetch no Get waits for and forgets it, so that the next
// Get of the id starts afresh instead of joining a doomed fetch. c.mu is
// held.
func (c *Cache) abandon(id string, fl *flight) {
	if c.inflight[id] == fl {
		delete(c.inflight, id)
	}
	if cancel := c.cancels[fl]; cancel != nil {
		cancel()
	}
}

// fetch runs one flight to its end and publishes the result.
func (c *Cache) fetch(ctx context.Context, id string, f Fetcher, maxBytes int64, fl *flight) {
	defer c.wg.Done()
	fl.sha, fl.size, fl.fetched, fl.err = c.fetchAndStore(ctx, id, f, maxBytes)
	c.mu.Lock()
	if c.inflight[id] == fl {
		delete(c.inflight, id)
	}
	if cancel := c.cancels[fl]; cancel != nil {
		cancel()
		delete(c.cancels, fl)
	}
	c.mu.Unlock()
	close(fl.done)
}

// fetchAndStore looks the id up again, since a flight that ended between
// Get's lookup and its start may have cached it, then fetches and stores it.
func (c *Cache) fetchAndStore(ctx context.Context, id string, f Fetcher, maxBytes int64) (sha string, size int64, fetched bool, err error) {
	if sha, size, ok, err := c.lookup(ctx, id); err != nil || ok {
		if ok && size > maxBytes {
			return "", 0, false, &FetchError{ID: id, Err: tooLarge(size, maxBytes)}
		}
		return sha, size, false, err
	}
	sha, size, err = c.fetchNew(ctx, id, f, maxBytes)
	return sha, size, err == nil, err
}

// fetchNew fetches id with f, checks and stores it, and records it in the
// index.
func (c *Cache) fetchNew(ctx context.Context, id string, f Fetcher, maxBytes int64) (string, int64, error) {
	rc, err := f.Fetch(ctx, id)
	if err != nil {
		return "", 0, asFetchError(id, err)
	}
	if rc == nil {
		return "", 0, &FetchError{ID: id, Err: errors.New("the fetcher returned no content")}
	}
	defer rc.Close()
	var r io.Reader = rc
	var m *magic
	if _, ext := knownExt(id); ext == ".parquet" {
		m = &magic{r: rc}
		r = m
	}
	sha, size, err := c.blobs.PutLimit(ctx, r, maxBytes)
	if err != nil {
		if tl, ok := errors.AsType[*artifacts.TooLargeError](err); ok {
			return "", 0, &FetchError{ID: id, Err: tooLarge(tl.Size, tl.Max)}
		}
		return "", 0, asFetchError(id, err)
	}
	// The blob is stored before its format is known; a rejected one has no
	// index row, so Blobstore.GC removes it after Grace. Removing it here
	// could break a concurrent Put of the same bytes.
	if m != nil && !m.isParquet() {
		return "", 0, &FetchError{ID: id, Err: fmt.Errorf(`%w: named .parquet but lacks the Parquet magic "PAR1" at head and tail`, ErrFormat)}
	}
	if _, err := c.db.ExecContext(ctx, `INSERT INTO dataset_cache (id, sha256, size, fetched) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, fetched = excluded.fetched`,
		id, sha, size, formatTime(time.Now())); err != nil {
		return "", 0, fmt.Errorf("record dataset %q: %w", id, err)
	}
	return sha, size, nil
}

// asFetchError returns err as a *FetchError about id, keeping the one a
// Fetcher or its reader made.
func asFetchError(id string, err error) error {
	if fe, ok := errors.AsType[*FetchError](err); ok {
		return fe // from the reader, under the blobstore's wrapping
	}
	return &FetchError{ID: id, Err: err}
}

// lookup returns the cached blob of id when there is an index row and the
// blob still exists.
func (c *Cache) lookup(ctx context.Context, id string) (sha string, size int64, ok bool, err error) {
	err = c.db.QueryRowContext(ctx, `SELECT sha256, size FROM dataset_cache WHERE id = ?`, id).Scan(&sha, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("look up dataset %q: %w", id, err)
	}
	p, err := c.blobs.Path(sha)
	if err != nil {
		return "", 0, false, nil // a corrupt row: fetch again, which replaces it
	}
	if _, err := os.Stat(p); err != nil {
		return "", 0, false, nil // collected or lost: fetch again
	}
	return sha, size, true, nil
}

// Forget deletes the index row of id, so the next Get fetches it again (a
// dataset that changed at its source). The blob stays until Blobstore.GC
// finds it unreferenced.
func (c *Cache) Forget(ctx context.Context, id string) error {
	if _, err := c.db.ExecContext(ctx, `DELETE FROM dataset_cache WHERE id = ?`, id); err != nil {
		return fmt.Errorf("forget dataset %q: %w", id, err)
	}
	return nil
}

// Referenced reports whether any cached dataset is the blob, making the
// Cache a Referencer for Blobstore.GC (combined with the artifacts Index).
func (c *Cache) Referenced(ctx context.Context, sha256 string) (bool, error) {
	var n int
	if err := c.db.QueryRowContext(ctx,
		`SELECT EXISTS (SELECT 1 FROM dataset_cache WHERE sha256 = ?)`, sha256).Scan(&n); err != nil {
		return false, fmt.Errorf("look up blob %s: %w", sha256, err)
	}
	return n != 0, nil
}

// Close cancels the fetches in flight and waits for them to end; Gets
// waiting for them fail. Later Gets fail with ErrClosed. Close is idempotent.
func (c *Cache) Close() error {
	c.mu.Lock()
	c.closed = true
	for _, cancel := range c.cancels {
		cancel()
	}
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}

// magic passes a reader through, keeping its first and last four bytes, to
// check Parquet's "PAR1" at both ends without reading the content twice.
type magic struct {
	r    io.Reader
	head []byte
	tail [4]byte
	n    int64
}

func (m *magic) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if need := 4 - len(m.head); need > 0 {
		m.head = append(m.head, p[:min(need, n)]...)
	}
	if n >= 4 {
		copy(m.tail[:], p[n-4:n])
	} else {
		for _, c := range p[:n] { // shift in: only the last four stay
			copy(m.tail[:], m.tail[1:])
			m.tail[3] = c
		}
	}
	m.n += int64(n)
	return n, err
}

// isParquet reports whether what was read starts and ends with "PAR1" with
// room for a footer length between.
func (m *magic) isParquet() bool {
	return m.n >= 12 && string(m.head) == "PAR1" && string(m.tail[:]) == "PAR1"
}

// formatTime is the store's time format: RFC 3339 UTC with a fixed
// nine-digit fraction, so stored times sort as text.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z07:00") }
