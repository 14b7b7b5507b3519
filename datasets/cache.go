package datasets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/artifacts"
)

// DefaultMaxBytes is the size cap Cache.Get applies when given none: 1 GiB.
const DefaultMaxBytes int64 = 1 << 30

// Scope says which selections share a dataset fetched once: the cache
// serves a dataset to a Request of its scope without asking the Fetcher.
type Scope string

const (
	// ScopeShared shares a dataset fetched for any session with every
	// session of every namespace: fewest fetches, but the Fetcher sees only
	// the first asker, so it cannot authorize per namespace or key, and a
	// dataset one user's session selected is served to every other user's.
	// Only for datasets every user may read.
	ScopeShared Scope = "shared"
	// ScopeNamespace shares a dataset among the sessions of one namespace:
	// the Fetcher is asked once per namespace (a tenant, say).
	ScopeNamespace Scope = "namespace"
	// ScopeSession keeps a dataset to one session key of one namespace: the
	// Fetcher is asked for every key that selects it, so it can authorize
	// each user. Identical content is still stored once. The default: a
	// session key is often a user's conversation, and sharing across users
	// is a choice the caller makes.
	ScopeSession Scope = "session"
)

// ParseScope returns the Scope named s (any letter case); "" is ScopeSession.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(strings.ToLower(strings.TrimSpace(s))); sc {
	case "":
		return ScopeSession, nil
	case ScopeShared, ScopeNamespace, ScopeSession:
		return sc, nil
	}
	return "", fmt.Errorf("dataset cache scope %q: want shared, namespace or session", s)
}

// CacheOption configures a Cache.
type CacheOption func(*Cache)

// WithScope sets which Gets share a fetched dataset (default ScopeSession).
// A scope ParseScope does not know counts as ScopeSession, the narrowest.
func WithScope(s Scope) CacheOption { return func(c *Cache) { c.scope = s } }

// Cache keeps fetched datasets as blobs in the artifacts Blobstore, with an
// index from dataset id (within its Scope) to blob in the agentbox
// database, so a dataset is fetched once however many sessions of its
// scope select it. Concurrent Gets of one id in one scope in this process
// share one fetch. It is safe for concurrent use by many goroutines and by
// other processes sharing the blobstore and database (two processes may
// each fetch an id once; identical content is stored once).
//
// Under ScopeSession, the default, the index is keyed by namespace, session
// key and id, and the Fetcher is asked for every key. Under ScopeShared it
// is keyed by id alone: a dataset fetched for one session or namespace is
// served to every other without asking the Fetcher again.
//
// A dataset that changed at its source is fetched again by a Get with
// Request.Refresh, or by any Get after Forget.
//
// The blobs share the Blobstore with artifacts, so Blobstore.GC must ask the
// Cache too (Cache.Referenced) or it removes datasets after Blobstore.Grace;
// a Get whose blob was removed anyway fetches the dataset again.
type Cache struct {
	blobs *artifacts.Blobstore
	db    *sql.DB
	scope Scope

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

// NewCache returns a Cache storing blobs in blobs and its index in db (the
// agentbox database, whose migrations create the tables). It does no I/O.
func NewCache(blobs *artifacts.Blobstore, db artifacts.Database, opts ...CacheOption) *Cache {
	c := &Cache{blobs: blobs, db: db.DB(), scope: ScopeSession,
		inflight: make(map[string]*flight), cancels: make(map[*flight]context.CancelFunc)}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Scope returns which Gets share a fetched dataset.
func (c *Cache) Scope() Scope { return c.scope }

// row is where the index keeps a dataset: its scope and id.
type row struct {
	scope, namespace, key, id string
}

// rowOf returns the index row a Get of req reads and writes under the
// Cache's scope.
func (c *Cache) rowOf(req Request) row {
	switch c.scope {
	case ScopeShared:
		return row{scope: string(ScopeShared), id: req.ID}
	case ScopeNamespace:
		return row{scope: string(ScopeNamespace), namespace: req.Namespace, id: req.ID}
	}
	return row{scope: string(ScopeSession), namespace: req.Namespace, key: req.SessionKey, id: req.ID}
}

// flightKey names a fetch in flight: its row, and whether it is a refresh
// (which never answers from the index).
func (r row) flightKey(refresh bool) string {
	return fmt.Sprintf("%q %q %q %q %v", r.scope, r.namespace, r.key, r.id, refresh)
}

// Get returns the blob holding dataset req.ID in req's scope: the cached
// one when it was fetched before (fetched false), else it fetches it with
// f and stores it (fetched true, also for a Get that joined another's
// fetch). With req.Refresh it fetches anew whatever is cached, and the new
// content replaces the old for later Gets of the scope. Content over
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
func (c *Cache) Get(ctx context.Context, req Request, f Fetcher, maxBytes int64) (sha256 string, size int64, fetched bool, err error) {
	id := req.ID
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
	r := c.rowOf(req)
	if !req.Refresh {
		if sha, size, ok, err := c.lookup(ctx, r); err != nil {
			return "", 0, false, err
		} else if ok {
			if size > maxBytes {
				return "", 0, false, &FetchError{ID: id, Err: tooLarge(size, maxBytes)}
			}
			return sha, size, false, nil
		}
	}

	fk := r.flightKey(req.Refresh)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return "", 0, false, ErrClosed
	}
	fl := c.inflight[fk]
	if fl == nil {
		// The fetch's context keeps the first caller's values but not its
		// cancellation: later Gets depend on it as much as the first.
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		fl = &flight{done: make(chan struct{})}
		c.inflight[fk] = fl
		c.cancels[fl] = cancel
		c.wg.Add(1)
		go c.fetch(fctx, fk, r, req, f, maxBytes, fl)
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
			c.abandon(fk, fl)
		}
		c.mu.Unlock()
		return "", 0, false, &FetchError{ID: id, Err: context.Cause(ctx)}
	}
}

// abandon cancels a fetch no Get waits for and forgets it, so that the next
// Get of the id starts afresh instead of joining a doomed fetch. c.mu is
// held.
func (c *Cache) abandon(fk string, fl *flight) {
	if c.inflight[fk] == fl {
		delete(c.inflight, fk)
	}
	if cancel := c.cancels[fl]; cancel != nil {
		cancel()
	}
}

// fetch runs one flight to its end and publishes the result.
func (c *Cache) fetch(ctx context.Context, fk string, r row, req Request, f Fetcher, maxBytes int64, fl *flight) {
	defer c.wg.Done()
	fl.sha, fl.size, fl.fetched, fl.err = c.fetchAndStore(ctx, r, req, f, maxBytes)
	c.mu.Lock()
	if c.inflight[fk] == fl {
		delete(c.inflight, fk)
	}
	if cancel := c.cancels[fl]; cancel != nil {
		cancel()
		delete(c.cancels, fl)
	}
	c.mu.Unlock()
	close(fl.done)
}

// fetchAndStore looks the row up again, since a flight that ended between
// Get's lookup and its start may have cached it (unless req is a refresh),
// then fetches and stores it.
func (c *Cache) fetchAndStore(ctx context.Context, r row, req Request, f Fetcher, maxBytes int64) (sha string, size int64, fetched bool, err error) {
	if !req.Refresh {
		if sha, size, ok, err := c.lookup(ctx, r); err != nil || ok {
			if ok && size > maxBytes {
				return "", 0, false, &FetchError{ID: r.id, Err: tooLarge(size, maxBytes)}
			}
			return sha, size, false, err
		}
	}
	sha, size, err = c.fetchNew(ctx, r, req, f, maxBytes)
	return sha, size, err == nil, err
}

// fetchNew fetches req with f, checks and stores it, and records it in the
// index at row r.
func (c *Cache) fetchNew(ctx context.Context, r row, req Request, f Fetcher, maxBytes int64) (string, int64, error) {
	id := r.id
	rc, err := f.Fetch(ctx, req)
	if err != nil {
		return "", 0, asFetchError(id, err)
	}
	if rc == nil {
		return "", 0, &FetchError{ID: id, Err: errors.New("the fetcher returned no content")}
	}
	defer rc.Close()
	var body io.Reader = rc
	var m *magic
	if _, ext := knownExt(id); ext == ".parquet" {
		m = &magic{r: rc}
		body = m
	}
	sha, size, err := c.blobs.PutLimit(ctx, body, maxBytes)
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
	if _, err := c.db.ExecContext(ctx, `INSERT INTO dataset_cache (scope, namespace, session_key, id, sha256, size, fetched)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (scope, namespace, session_key, id) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, fetched = excluded.fetched`,
		r.scope, r.namespace, r.key, id, sha, size, formatTime(time.Now())); err != nil {
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

// lookup returns the cached blob of row r when the index has it and the
// blob still exists.
func (c *Cache) lookup(ctx context.Context, r row) (sha string, size int64, ok bool, err error) {
	err = c.db.QueryRowContext(ctx, `SELECT sha256, size FROM dataset_cache
		WHERE scope = ? AND namespace = ? AND session_key = ? AND id = ?`, r.scope, r.namespace, r.key, r.id).Scan(&sha, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("look up dataset %q: %w", r.id, err)
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

// Forget deletes the cached copy of req.ID that a Get of req would use, so
// the next such Get fetches it again (a dataset that changed at its
// source). Under ScopeSession an empty req.SessionKey forgets the copies of
// every key of req.Namespace. The blobs stay until Blobstore.GC finds them
// unreferenced; sessions that staged the dataset keep their files.
func (c *Cache) Forget(ctx context.Context, req Request) error {
	r := c.rowOf(req)
	query := `DELETE FROM dataset_cache WHERE scope = ? AND namespace = ? AND session_key = ? AND id = ?`
	args := []any{r.scope, r.namespace, r.key, r.id}
	if r.scope == string(ScopeSession) && r.key == "" {
		query = `DELETE FROM dataset_cache WHERE scope = ? AND namespace = ? AND id = ?`
		args = []any{r.scope, r.namespace, r.id}
	}
	if _, err := c.db.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("forget dataset %q: %w", req.ID, err)
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
