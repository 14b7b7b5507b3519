package config_test

import (
	"testing"

	"github.com/agentbox/agentbox/config"
)

// TestDefaultMaxMemoryAdmitsSDKDefault: OpenSandbox's SDK asks every
// sandbox for {"cpu": "1", "memory": "2Gi"} unless told otherwise; with no
// SANDBOX_MAX_MEMORY_MB the default maximum admits it, while an
// operator's explicit maximum stays the maximum (issue 24 row 1).
func TestDefaultMaxMemoryAdmitsSDKDefault(t *testing.T) {
	const sdkDefaultMB = 2048 // "2Gi"
	for _, tt := range []struct {
		name     string
		env      map[string]string
		max, mem int
		explicit bool
	}{
		{"defaults", nil, 2048, 1024, false},
		{"more memory than the default maximum", map[string]string{"SANDBOX_MEMORY_MB": "4096"}, 4096, 4096, false},
		{"less memory", map[string]string{"SANDBOX_MEMORY_MB": "512"}, 2048, 512, false},
		{"explicit maximum", map[string]string{"SANDBOX_MAX_MEMORY_MB": "1024"}, 1024, 1024, true},
		{"explicit maximum above", map[string]string{"SANDBOX_MAX_MEMORY_MB": "8192"}, 8192, 1024, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			c, err := config.FromLookup(env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.SessionMaxMemoryMB(); got != tt.max {
				t.Errorf("SessionMaxMemoryMB = %d, want %d", got, tt.max)
			}
			if c.MemoryMB != tt.mem || c.MaxMemoryExplicit() != tt.explicit {
				t.Errorf("MemoryMB %d, explicit %v; want %d, %v", c.MemoryMB, c.MaxMemoryExplicit(), tt.mem, tt.explicit)
			}
			if !tt.explicit && c.SessionMaxMemoryMB() < sdkDefaultMB {
				t.Errorf("the default maximum %d MiB refuses the SDK's default 2Gi", c.SessionMaxMemoryMB())
			}
		})
	}
	if d := config.Default(); d.SessionMaxMemoryMB() < sdkDefaultMB {
		t.Errorf("Default().SessionMaxMemoryMB() = %d, want ≥ 2048", d.SessionMaxMemoryMB())
	}
}
