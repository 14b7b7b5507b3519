package datasets_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/store"
)

// recorder is a Fetcher that remembers who asked, and serves the content
// version holds at the time.
type recorder struct {
	mu      sync.Mutex
	asked   []datasets.Request
	version string
}

func (r *recorder) Fetch(_ context.Context, req datasets.Request) (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, req)
	return io.NopCloser(bytes.NewReader([]byte(req.ID + " " + r.version))), nil
}

func (r *recorder) keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.asked {
		out = append(out, q.Namespace+"/"+q.SessionKey)
	}
	return out
}

// TestCacheScopes checks who the Fetcher sees, and who shares a fetch,
// under each scope.
func TestCacheScopes(t *testing.T) {
	asks := []datasets.Request{
		{ID: "d.csv", Namespace: "a", SessionKey: "alice"},
		{ID: "d.csv", Namespace: "a", SessionKey: "bob"},
		{ID: "d.csv", Namespace: "b", SessionKey: "alice"},
		{ID: "d.csv", Namespace: "a", SessionKey: "alice"},
	}
	for _, tt := range []struct {
		scope datasets.Scope
		want  []string // the Fetcher's callers, in order
	}{
		{datasets.ScopeShared, []string{"a/alice"}},
		{datasets.ScopeNamespace, []string{"a/alice", "b/alice"}},
		{datasets.ScopeSession, []string{"a/alice", "a/bob", "b/alice"}},
		{"bogus", []string{"a/alice", "a/bob", "b/alice"}}, // unknown: the narrowest
	} {
		t.Run(string(tt.scope), func(t *testing.T) {
			e := newEnv(t)
			c := datasets.NewCache(e.blobs, e.store, datasets.WithScope(tt.scope))
			defer c.Close()
			f := &recorder{version: "v1"}
			var shas []string
			for _, q := range asks {
				sha, _, _, err := c.Get(t.Context(), q, f, 0)
				if err != nil {
					t.Fatal(err)
				}
				shas = append(shas, sha)
			}
			if got := f.keys(); !slices.Equal(got, tt.want) {
				t.Errorf("the Fetcher was asked by %v, want %v", got, tt.want)
			}
			if len(slices.Compact(shas)) != 1 {
				t.Errorf("identical content stored as several blobs: %v", shas)
			}
		})
	}
}

// TestCacheRefresh fetches a dataset that changed at its source again:
// Refresh asks the source whatever is cached, and later Gets of the scope
// get the new content; Forget makes the next Get fetch.
func TestCacheRefresh(t *testing.T) {
	e := newEnv(t)
	c := datasets.NewCache(e.blobs, e.store, datasets.WithScope(datasets.ScopeSession))
	defer c.Close()
	f := &recorder{version: "v1"}
	alice := datasets.Request{ID: "d.csv", Namespace: "a", SessionKey: "alice"}
	bob := datasets.Request{ID: "d.csv", Namespace: "a", SessionKey: "bob"}
	other := datasets.Request{ID: "d.csv", Namespace: "b", SessionKey: "bob"}
	get := func(q datasets.Request) (string, bool) {
		t.Helper()
		sha, _, fetched, err := c.Get(t.Context(), q, f, 0)
		if err != nil {
			t.Fatal(err)
		}
		return e.blob(t, sha), fetched
	}
	get(alice)
	get(bob)
	get(other)
	f.version = "v2"
	if got, fetched := get(alice); got != "d.csv v1" || fetched {
		t.Fatalf("cached Get: %q fetched %v, want v1 from the cache", got, fetched)
	}
	refresh := alice
	refresh.Refresh = true
	if got, fetched := get(refresh); got != "d.csv v2" || !fetched {
		t.Errorf("Refresh: %q fetched %v, want v2 fetched", got, fetched)
	}
	if last := f.asked[len(f.asked)-1]; !last.Refresh || last.SessionKey != "alice" {
		t.Errorf("the Fetcher was asked %+v, want alice's refresh", last)
	}
	if got, fetched := get(alice); got != "d.csv v2" || fetched {
		t.Errorf("after Refresh: %q fetched %v, want v2 from the cache", got, fetched)
	}
	if got, _ := get(bob); got != "d.csv v1" {
		t.Errorf("bob's copy: %q, want v1 (only alice refreshed)", got)
	}

	// Forget without a key forgets every key of the namespace, no other.
	if err := c.Forget(t.Context(), datasets.Request{ID: "d.csv", Namespace: "a"}); err != nil {
		t.Fatal(err)
	}
	if got, fetched := get(bob); got != "d.csv v2" || !fetched {
		t.Errorf("after Forget: %q fetched %v, want v2 fetched", got, fetched)
	}
	if got, fetched := get(other); got != "d.csv v1" || fetched {
		t.Errorf("another namespace after Forget: %q fetched %v, want its v1 kept", got, fetched)
	}
}

func TestParseScope(t *testing.T) {
	for in, want := range map[string]datasets.Scope{"": datasets.ScopeSession, "Namespace": datasets.ScopeNamespace,
		" session ": datasets.ScopeSession, "shared": datasets.ScopeShared} {
		if got, err := datasets.ParseScope(in); got != want || err != nil {
			t.Errorf("ParseScope(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := datasets.ParseScope("user"); err == nil {
		t.Error("ParseScope(user) succeeded")
	}
}

// TestCacheUpgrade keeps what a database of the unscoped cache (schema
// version 5) had cached: shared, as it was.
func TestCacheUpgrade(t *testing.T) {
	e := newEnv(t)
	sha, size, err := e.blobs.Put(t.Context(), bytes.NewReader([]byte("old content")))
	if err != nil {
		t.Fatal(err)
	}
	db := e.store.DB()
	if _, err := db.ExecContext(t.Context(), `DROP TABLE dataset_cache;
		CREATE TABLE dataset_cache (id TEXT PRIMARY KEY, sha256 TEXT NOT NULL, size INTEGER NOT NULL, fetched TEXT NOT NULL);
		INSERT INTO dataset_cache VALUES ('old.txt', ?, ?, '2025-01-01T00:00:00.000000000Z');
		ALTER TABLE sessions DROP COLUMN expires; ALTER TABLE sessions DROP COLUMN paused; ALTER TABLE sessions DROP COLUMN pause_reason;
		ALTER TABLE executions DROP COLUMN kind; ALTER TABLE executions DROP COLUMN exit_code; ALTER TABLE executions DROP COLUMN trace_id;
		DELETE FROM schema_migrations WHERE version >= 6`, sha, size); err != nil {
		t.Fatal(err)
	}
	path := e.store.Path()
	e.store.Close()
	s, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := datasets.NewCache(e.blobs, s, datasets.WithScope(datasets.ScopeShared))
	defer c.Close()
	f := &recorder{}
	got, _, fetched, err := c.Get(t.Context(), datasets.Request{ID: "old.txt", Namespace: "x", SessionKey: "k"}, f, 0)
	if err != nil || got != sha || fetched {
		t.Errorf("after the upgrade: %s fetched %v, %v; want the cached %s", got, fetched, err, sha)
	}
}

// TestHTTPFetcherSendsSession checks the headers that tell the source who
// asks, escaped so that any key is a valid header, and no-cache on a
// refresh.
func TestHTTPFetcherSendsSession(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	h := &datasets.HTTPFetcher{URLTemplate: srv.URL + "/{id}"}
	key := "user 42\r\nX-Evil: 1 é"
	rc, err := h.Fetch(t.Context(), datasets.Request{ID: "d", Namespace: "team-a", SessionKey: key, Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if k, err := url.PathUnescape(got.Get(datasets.HeaderSessionKey)); err != nil || k != key {
		t.Errorf("%s: %q (%v), want %q escaped", datasets.HeaderSessionKey, got.Get(datasets.HeaderSessionKey), err, key)
	}
	if ns := got.Get(datasets.HeaderNamespace); ns != "team-a" {
		t.Errorf("%s: %q", datasets.HeaderNamespace, ns)
	}
	if got.Get("X-Evil") != "" || got.Get("Cache-Control") != "no-cache" {
		t.Errorf("headers %v", got)
	}
	rc, err = h.Fetch(t.Context(), datasets.Request{ID: "d"})
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if got.Get(datasets.HeaderSessionKey) != "" || got.Get(datasets.HeaderNamespace) != "" || got.Get("Cache-Control") != "" {
		t.Errorf("a request without a session sent %v", got)
	}
}
