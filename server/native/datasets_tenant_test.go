package native_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/session"
)

// TestDatasetsStayWithTheirTenant: with the default settings, a dataset one
// tenant selected is never served to another from the cache: the fetcher is
// asked again, for the other tenant's session, and can refuse it.
func TestDatasetsStayWithTheirTenant(t *testing.T) {
	const keyA, keyB = "tenant-a-key-0123456789", "tenant-b-key-0123456789"
	var mu sync.Mutex
	var asked []string
	fetcher := datasets.BytesFetcher(func(_ context.Context, r datasets.Request) ([]byte, error) {
		mu.Lock()
		asked = append(asked, r.SessionKey)
		mu.Unlock()
		return []byte("private to " + r.SessionKey), nil
	})
	e := newEnv(t, []string{keyA, keyB}, func(c *config.Config) { c.DatasetAccess = config.AccessAPI }, session.WithFetcher(fetcher))
	for _, key := range []string{keyA, keyB} {
		resp, b := e.do(t, req{method: "POST", path: sess + "s/datasets/payroll/select", key: key})
		if resp.StatusCode != 200 {
			t.Fatalf("select: %d %s", resp.StatusCode, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0] == asked[1] {
		t.Fatalf("the fetcher was asked for %q: the second tenant got the first one's copy from the cache (DATASET_CACHE_SCOPE)", asked)
	}
	resp, b := e.do(t, req{method: "POST", path: sess + "s/executions", key: keyB,
		body: execBody("print(open('/session/data/payroll').read())", "")})
	if resp.StatusCode != 200 || strings.Contains(string(b), asked[0]) || !strings.Contains(string(b), asked[1]) {
		t.Errorf("tenant B reads: %d %s", resp.StatusCode, b)
	}
}
