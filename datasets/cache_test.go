package datasets_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/store"
)

// env is a database and blobstore in a temporary folder.
type env struct {
	dir   string
	store *store.Store
	blobs *artifacts.Blobstore
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(t.Context(), filepath.Join(dir, "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &env{dir: dir, store: s, blobs: artifacts.NewBlobstore(filepath.Join(dir, "blobs"))}
}

func (e *env) cache(t *testing.T) *datasets.Cache {
	c := datasets.NewCache(e.blobs, e.store)
	t.Cleanup(func() { c.Close() })
	return c
}

// counter is a Fetcher serving content for every id and counting calls.
type counter struct {
	calls   atomic.Int32
	content func(id string) []byte
}

func (c *counter) Fetch(ctx context.Context, req datasets.Request) (io.ReadCloser, error) {
	c.calls.Add(1)
	return io.NopCloser(bytes.NewReader(c.content(req.ID))), nil
}

func constant(s string) *counter {
	return &counter{content: func(string) []byte { return []byte(s) }}
}

// blob returns the content of a blob.
func (e *env) blob(t *testing.T, sha string) string {
	t.Helper()
	f, err := e.blobs.Open(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCacheFetchesOnce(t *testing.T) {
	e := newEnv(t)
	c := e.cache(t)
	f := constant("a,b\n1,2\n")
	sha, size, fetched, err := c.Get(t.Context(), datasets.Request{ID: "t.csv"}, f, 0)
	if err != nil || !fetched || size != 8 {
		t.Fatalf("first Get: %s %d %v %v", sha, size, fetched, err)
	}
	if got := e.blob(t, sha); got != "a,b\n1,2\n" {
		t.Errorf("blob holds %q", got)
	}
	sha2, size2, fetched, err := c.Get(t.Context(), datasets.Request{ID: "t.csv"}, f, 0)
	if err != nil || fetched || sha2 != sha || size2 != size {
		t.Errorf("second Get: %s %d %v %v; want the cached blob", sha2, size2, fetched, err)
	}
	// A new process finds the index in the database.
	sha3, _, fetched, err := datasets.NewCache(e.blobs, e.store).Get(t.Context(), datasets.Request{ID: "t.csv"}, f, 0)
	if err != nil || fetched || sha3 != sha {
		t.Errorf("Get from a new Cache: %s %v %v", sha3, fetched, err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

func TestCacheSingleFlight(t *testing.T) {
	c := newEnv(t).cache(t)
	var calls atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	f := datasets.FetcherFunc(func(ctx context.Context, _ datasets.Request) (io.ReadCloser, error) {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-release
		return io.NopCloser(strings.NewReader("shared")), nil
	})
	const n = 20
	var wg sync.WaitGroup
	shas := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { shas[i], _, _, errs[i] = c.Get(t.Context(), datasets.Request{ID: "d.txt"}, f, 0) })
	}
	<-started
	time.Sleep(20 * time.Millisecond) // let the others join; late ones find the cache
	close(release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || shas[i] != shas[0] {
			t.Errorf("Get %d: %s, %v", i, shas[i], errs[i])
		}
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("%d fetches for %d concurrent Gets, want 1", got, n)
	}
}

func TestCacheTooLarge(t *testing.T) {
	c := newEnv(t).cache(t)
	f := constant(strings.Repeat("x", 100))
	_, _, _, err := c.Get(t.Context(), datasets.Request{ID: "big.csv"}, f, 10)
	fe, ok := errors.AsType[*datasets.FetchError](err)
	if !ok || !errors.Is(err, datasets.ErrTooLarge) || fe.ID != "big.csv" {
		t.Fatalf("Get over the limit: %v; want a *FetchError wrapping ErrTooLarge", err)
	}
	if want := `fetch dataset "big.csv": dataset too large: at least 11 B, limit 10 B`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if _, _, fetched, err := c.Get(t.Context(), datasets.Request{ID: "big.csv"}, f, 0); err != nil || !fetched {
		t.Fatalf("Get under the default limit: %v, fetched %v; the failure must not be cached", err, fetched)
	}
	// The cached copy is held to the limit of each Get too.
	if _, _, _, err := c.Get(t.Context(), datasets.Request{ID: "big.csv"}, f, 50); !errors.Is(err, datasets.ErrTooLarge) {
		t.Errorf("cached dataset over a lower limit: %v", err)
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

func TestCacheParquetCheck(t *testing.T) {
	c := newEnv(t).cache(t)
	good := parquetBytes(t, 10, 5)
	for _, tt := range []struct {
		id      string
		content []byte
		ok      bool
	}{
		{"good.parquet", good, true},
		{"GOOD2.Parquet", good, true},
		{"fake.parquet", []byte("id,name\n1,x\n"), false},
		{"headless.parquet", good[4:], false},
		{"tailless.parquet", good[:len(good)-1], false},
		{"short.parquet", []byte("PAR1PAR1"), false},
		{"empty.parquet", nil, false},
		{"any.csv", []byte("PAR1 is not checked here"), true},
	} {
		f := &counter{content: func(string) []byte { return tt.content }}
		_, _, _, err := c.Get(t.Context(), datasets.Request{ID: tt.id}, f, 0)
		if tt.ok && err != nil {
			t.Errorf("Get(%s): %v", tt.id, err)
		}
		if !tt.ok && (!errors.Is(err, datasets.ErrFormat) || !strings.Contains(err.Error(), "not the format it claims")) {
			t.Errorf("Get(%s): %v, want ErrFormat", tt.id, err)
		}
		if !tt.ok { // not cached: asked again
			c.Get(t.Context(), datasets.Request{ID: tt.id}, f, 0)
			if n := f.calls.Load(); n != 2 {
				t.Errorf("Get(%s) twice: %d fetches, want 2", tt.id, n)
			}
		}
	}
}

// failingReader fails after some bytes.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("connection reset")
	}
	n := min(r.n, len(p))
	r.n -= n
	return n, nil
}

func TestCacheFetchErrors(t *testing.T) {
	c := newEnv(t).cache(t)
	mine := &datasets.FetchError{ID: "x", Status: 503, Err: errors.New("busy")}
	for _, tt := range []struct {
		name string
		f    datasets.Fetcher
		want string
	}{
		{"error", datasets.FetcherFunc(func(context.Context, datasets.Request) (io.ReadCloser, error) {
			return nil, errors.New("no route")
		}), `fetch dataset "x": no route`},
		{"fetch error", datasets.FetcherFunc(func(context.Context, datasets.Request) (io.ReadCloser, error) {
			return nil, mine
		}), `fetch dataset "x": HTTP 503: busy`},
		{"nil reader", datasets.FetcherFunc(func(context.Context, datasets.Request) (io.ReadCloser, error) {
			return nil, nil
		}), `fetch dataset "x": the fetcher returned no content`},
		{"read error", datasets.FetcherFunc(func(context.Context, datasets.Request) (io.ReadCloser, error) {
			return io.NopCloser(&failingReader{n: 100}), nil
		}), `connection reset`},
	} {
		_, _, _, err := c.Get(t.Context(), datasets.Request{ID: "x"}, tt.f, 0)
		if _, ok := errors.AsType[*datasets.FetchError](err); !ok || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want a *FetchError saying %q", tt.name, err, tt.want)
		}
	}
	if _, _, _, err := c.Get(t.Context(), datasets.Request{ID: ""}, constant("x"), 0); !errors.Is(err, datasets.ErrInvalidID) {
		t.Errorf("Get of an empty id: %v", err)
	}
}

// blocking is a Fetcher that waits for release or its context, recording
// how each call ended.
type blocking struct {
	calls     atomic.Int32
	started   chan struct{} // receives once per call
	release   chan struct{}
	cancelled chan error // receives the context error of calls that gave up
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 10), release: make(chan struct{}), cancelled: make(chan error, 10)}
}

func (b *blocking) Fetch(ctx context.Context, req datasets.Request) (io.ReadCloser, error) {
	b.calls.Add(1)
	b.started <- struct{}{}
	select {
	case <-b.release:
		return io.NopCloser(strings.NewReader("content of " + req.ID)), nil
	case <-ctx.Done():
		b.cancelled <- ctx.Err()
		return nil, ctx.Err()
	}
}

// TestCacheWaiterGivesUp checks that one caller giving up does not cancel
// the fetch another waits for.
func TestCacheWaiterGivesUp(t *testing.T) {
	c := newEnv(t).cache(t)
	f := newBlocking()
	ctxA, cancelA := context.WithCancel(t.Context())
	errA := make(chan error, 1)
	go func() { _, _, _, err := c.Get(ctxA, datasets.Request{ID: "d"}, f, 0); errA <- err }()
	<-f.started
	type result struct {
		sha     string
		fetched bool
		err     error
	}
	resB := make(chan result, 1)
	go func() {
		sha, _, fetched, err := c.Get(t.Context(), datasets.Request{ID: "d"}, f, 0)
		resB <- result{sha, fetched, err}
	}()
	time.Sleep(20 * time.Millisecond) // B joins the flight
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Get: %v, want context.Canceled", err)
	}
	select {
	case err := <-f.cancelled:
		t.Fatalf("the fetch was cancelled (%v) while B still waited", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(f.release)
	if r := <-resB; r.err != nil || !r.fetched || r.sha == "" {
		t.Errorf("waiting Get: %+v", r)
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

// TestCacheAbandoned checks that a fetch no caller waits for is cancelled,
// and that the next Get starts afresh.
func TestCacheAbandoned(t *testing.T) {
	c := newEnv(t).cache(t)
	f := newBlocking()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, _, _, err := c.Get(ctx, datasets.Request{ID: "d"}, f, 0); done <- err }()
	<-f.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v", err)
	}
	if err := <-f.cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("fetch ended with %v", err)
	}
	close(f.release)
	if _, _, fetched, err := c.Get(t.Context(), datasets.Request{ID: "d"}, f, 0); err != nil || !fetched {
		t.Errorf("Get after an abandoned fetch: fetched %v, %v", fetched, err)
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

func TestCacheClose(t *testing.T) {
	c := newEnv(t).cache(t)
	f := newBlocking()
	done := make(chan error, 1)
	go func() { _, _, _, err := c.Get(t.Context(), datasets.Request{ID: "d"}, f, 0); done <- err }()
	<-f.started
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Get during Close: %v, want context.Canceled", err)
	}
	if _, _, _, err := c.Get(t.Context(), datasets.Request{ID: "e"}, f, 0); !errors.Is(err, datasets.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCacheGC checks that the Cache keeps its blobs through Blobstore.GC,
// and fetches again when one is gone anyway.
func TestCacheGC(t *testing.T) {
	e := newEnv(t)
	c := e.cache(t)
	f := constant("keep me")
	sha, _, _, err := c.Get(t.Context(), datasets.Request{ID: "k.txt"}, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Referenced(t.Context(), sha); !ok || err != nil {
		t.Errorf("Referenced(cached blob) = %v, %v", ok, err)
	}
	if ok, err := c.Referenced(t.Context(), strings.Repeat("0", 64)); ok || err != nil {
		t.Errorf("Referenced(other blob) = %v, %v", ok, err)
	}
	e.blobs.Grace = time.Nanosecond
	time.Sleep(time.Millisecond)
	if n, err := e.blobs.GC(t.Context(), c); n != 0 || err != nil {
		t.Fatalf("GC removed %d blobs, %v; want the cached one kept", n, err)
	}
	if err := c.Forget(t.Context(), datasets.Request{ID: "k.txt"}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.blobs.GC(t.Context(), c); n != 1 || err != nil {
		t.Fatalf("GC after Forget removed %d blobs, %v; want 1", n, err)
	}
	// A blob gone while its row stays (a GC that did not ask the Cache).
	if _, _, fetched, err := c.Get(t.Context(), datasets.Request{ID: "k.txt"}, f, 0); !fetched || err != nil {
		t.Fatalf("Get after Forget: fetched %v, %v", fetched, err)
	}
	if err := e.blobs.Remove(sha); err != nil {
		t.Fatal(err)
	}
	if _, _, fetched, err := c.Get(t.Context(), datasets.Request{ID: "k.txt"}, f, 0); !fetched || err != nil {
		t.Errorf("Get of a lost blob: fetched %v, %v; want a new fetch", fetched, err)
	}
	if got := e.blob(t, sha); got != "keep me" {
		t.Errorf("blob holds %q", got)
	}
}

func TestCacheHTTP(t *testing.T) {
	srv, requests := countingServer(t, "x,y\n")
	c := newEnv(t).cache(t)
	h := &datasets.HTTPFetcher{URLTemplate: srv.URL + "/{id}"}
	for range 3 {
		if _, _, _, err := c.Get(t.Context(), datasets.Request{ID: "xy.csv"}, h, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}
