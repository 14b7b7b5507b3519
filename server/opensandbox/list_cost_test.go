package opensandbox_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestListCostIsTheTenantsOwn: what GET /v1/sandboxes costs tenant A (its
// engine calls) does not depend on how many sandboxes tenant B has, and a
// list reads no memory statistics at all. Before, the Manager's List read
// the memory use of every tenant's sandbox (one engine call each) before
// the handler dropped the others': a timing side channel (1.0 s -> 4.1 s
// with 27 of another tenant's) and N engine calls a request.
func TestListCostIsTheTenantsOwn(t *testing.T) {
	drv := &countingDriver{Driver: sessiontest.NewDriver()}
	e := newFakeEnv(t, drv)
	mine := e.create(nil)

	list := func() (inspects, memory int64) {
		t.Helper()
		i0, m0 := drv.inspects.Load(), drv.memory.Load()
		r := e.do("GET", "/v1/sandboxes", nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("list: status %d %s", r.status, r.body)
		}
		var resp struct {
			Items []sandbox `json:"items"`
		}
		r.json(t, &resp)
		if len(resp.Items) != 1 || resp.Items[0].ID != mine.ID {
			t.Fatalf("list: items %+v, want only %s", resp.Items, mine.ID)
		}
		return drv.inspects.Load() - i0, drv.memory.Load() - m0
	}
	inspects0, memory0 := list()

	e.key = keyB
	for range 20 {
		e.create(nil)
	}
	e.key = keyA
	inspects20, memory20 := list()

	if inspects20 != inspects0 {
		t.Errorf("A's list inspected %d containers with B's 20 sandboxes, %d with none: want equal", inspects20, inspects0)
	}
	if memory0 != 0 || memory20 != 0 {
		t.Errorf("a list read memory statistics %d times (none of B's), %d times (20 of B's): want 0", memory0, memory20)
	}

	// The Manager's filter itself runs before the per-session reads.
	a, err := e.keys.Lookup(keyA)
	if err != nil {
		t.Fatal(err)
	}
	m0 := drv.memory.Load()
	infos, err := e.m.List(context.Background(), session.ListKeys(func(key string) bool { _, ok := a.Name(key); return ok }))
	if err != nil {
		t.Fatal(err)
	}
	if n := drv.memory.Load() - m0; len(infos) != 1 || n != 1 {
		t.Errorf("List(ListKeys(A's)) = %d sessions after %d memory reads: want 1 and 1", len(infos), n)
	}
}
