package session_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/session"
)

// source is a dataset source that records who asks and serves the content
// version holds at the time.
type source struct {
	mu      sync.Mutex
	asked   []datasets.Request
	version string
}

func (s *source) fetcher() datasets.Fetcher {
	return datasets.FetcherFunc(func(_ context.Context, req datasets.Request) (io.ReadCloser, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.asked = append(s.asked, req)
		return io.NopCloser(strings.NewReader("content " + s.version + "\n")), nil
	})
}

func (s *source) set(v string) {
	s.mu.Lock()
	s.version = v
	s.mu.Unlock()
}

// last returns the latest request and how many there were.
func (s *source) last() (datasets.Request, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.asked) == 0 {
		return datasets.Request{}, 0
	}
	return s.asked[len(s.asked)-1], len(s.asked)
}

func selectOK(t *testing.T, m *session.Manager, key, id string, opts ...session.SelectOption) session.Selection {
	t.Helper()
	sel, err := m.SelectDataset(context.Background(), key, id, opts...)
	if err != nil || sel.Status != datasets.StatusLoaded {
		t.Fatalf("select %s for %s: %+v %v", id, key, sel, err)
	}
	return sel
}

func readData(t *testing.T, m *session.Manager, key string) string {
	t.Helper()
	res := mustExec(t, m, key, "print(open('/session/data/d.csv').read(), end='')")
	if res.Error != nil {
		t.Fatalf("read: %+v", res.Error)
	}
	return strings.TrimSpace(res.Stdout)
}

// TestDatasetsPerSessionKey: the fetcher is told the namespace and session
// key that select a dataset; under DATASET_CACHE_SCOPE=session each key is
// asked for; Refresh fetches a changed dataset again for its session only.
func TestDatasetsPerSessionKey(t *testing.T) {
	t.Parallel()
	src := &source{version: "v1"}
	cfg := testConfig(t, func(c *config.Config) {
		c.DatasetAccess = config.AccessAPI
		c.DatasetCacheScope = config.CacheSession
	})
	ns := namespace()
	m := managerFor(t, cfg, ns, session.WithFetcher(src.fetcher()))

	if sel := selectOK(t, m, "alice", "d.csv"); !sel.Fetched {
		t.Errorf("alice's selection was not fetched: %+v", sel)
	}
	if req, n := src.last(); n != 1 || req.ID != "d.csv" || req.Namespace != ns || req.SessionKey != "alice" || req.Refresh {
		t.Fatalf("the fetcher saw %+v (%d requests), want alice's in %s", req, n, ns)
	}
	if sel := selectOK(t, m, "bob", "d.csv"); !sel.Fetched {
		t.Errorf("bob's selection came from alice's copy: %+v", sel)
	}
	if req, n := src.last(); n != 2 || req.SessionKey != "bob" {
		t.Fatalf("the fetcher saw %+v (%d requests), want bob's", req, n)
	}

	src.set("v2")
	if sel := selectOK(t, m, "alice", "d.csv"); sel.Fetched {
		t.Errorf("selecting a loaded dataset again fetched it: %+v", sel)
	}
	if sel := selectOK(t, m, "alice", "d.csv", session.Refresh()); !sel.Fetched {
		t.Errorf("Refresh did not fetch: %+v", sel)
	}
	if req, n := src.last(); n != 3 || req.SessionKey != "alice" || !req.Refresh {
		t.Errorf("the fetcher saw %+v (%d requests), want alice's refresh", req, n)
	}
	if got := readData(t, m, "alice"); got != "content v2" {
		t.Errorf("alice reads %q after Refresh, want v2", got)
	}
	if got := readData(t, m, "bob"); got != "content v1" {
		t.Errorf("bob reads %q, want his v1", got)
	}
}

// TestDatasetsForget: under the shared scope (chosen) a dataset is
// fetched once for all keys, until ForgetDataset.
func TestDatasetsForget(t *testing.T) {
	t.Parallel()
	src := &source{version: "v1"}
	cfg := testConfig(t, func(c *config.Config) {
		c.DatasetAccess = config.AccessAPI
		c.DatasetCacheScope = config.CacheShared
	})
	m := managerFor(t, cfg, namespace(), session.WithFetcher(src.fetcher()))

	selectOK(t, m, "x", "d.csv")
	if sel := selectOK(t, m, "y", "d.csv"); sel.Fetched {
		t.Errorf("shared scope: y's selection was fetched again: %+v", sel)
	}
	if req, n := src.last(); n != 1 || req.SessionKey != "x" {
		t.Errorf("the fetcher saw %+v (%d requests), want x's only", req, n)
	}
	src.set("v2")
	if err := m.ForgetDataset(context.Background(), "d.csv"); err != nil {
		t.Fatal(err)
	}
	if sel := selectOK(t, m, "z", "d.csv"); !sel.Fetched {
		t.Errorf("after ForgetDataset: %+v, want a fetch", sel)
	}
	if got := readData(t, m, "z"); got != "content v2" {
		t.Errorf("z reads %q, want v2", got)
	}
	if got := readData(t, m, "y"); got != "content v1" {
		t.Errorf("y reads %q, want the v1 it loaded", got)
	}
	if err := m.ForgetDataset(context.Background(), ""); err == nil {
		t.Error("ForgetDataset of an empty id succeeded")
	}
}
