package session_test

import (
	"testing"

	"github.com/agentbox/agentbox/config"
)

// TestFoldersExistAtStart: the README's own first example,
// df.to_csv('/session/artifacts/report.csv'), works in the first execution
// of a fresh session, whatever its storage and wherever its container came
// from; so does writing to /session/data.
func TestFoldersExistAtStart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(*config.Config)
	}{
		{"tmpfs", func(c *config.Config) {}},
		{"bind", func(c *config.Config) { c.SessionStorage = config.StorageBind }},
		{"pooled tmpfs", func(c *config.Config) { c.PoolSize = 1 }},
		{"pooled bind", func(c *config.Config) { c.SessionStorage = config.StorageBind; c.PoolSize = 1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, c.edit)
			ns := namespace()
			m := managerFor(t, cfg, ns)
			if cfg.PoolSize > 0 {
				waitWarm(t, ns, 1)
			}
			res := mustExec(t, m, "fresh", "open('/session/artifacts/report.csv', 'w').write('x,y\\n1,2\\n')\nopen('/session/data/scratch.txt', 'w').write('ok')")
			if res.Error != nil {
				t.Fatalf("first execution: %s: %s", res.Error.Name, res.Error.Value)
			}
			if len(res.Artifacts) != 1 || res.Artifacts[0].Name != "report.csv" {
				t.Fatalf("artifacts %+v, want report.csv", res.Artifacts)
			}
		})
	}
}
