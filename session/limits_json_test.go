package session

import (
	"encoding/json"
	"testing"
	"time"
)

// TestLimitsJSON: a TTL reads as whole seconds (ttl_s, rounded up), is left
// out when there is none, and reads back as it was written.
func TestLimitsJSON(t *testing.T) {
	cases := []struct {
		ttl  time.Duration
		want string
		back time.Duration
	}{
		{0, `{"memory_mb":512,"cpus":1.5,"pids":256}`, 0},
		{30 * time.Minute, `{"memory_mb":512,"cpus":1.5,"pids":256,"ttl_s":1800}`, 30 * time.Minute},
		{1500 * time.Millisecond, `{"memory_mb":512,"cpus":1.5,"pids":256,"ttl_s":2}`, 2 * time.Second},
	}
	for _, c := range cases {
		b, err := json.Marshal(Info{Limits: &Limits{MemoryMB: 512, CPUs: 1.5, Pids: 256, TTL: c.ttl}})
		if err != nil {
			t.Fatal(err)
		}
		var raw struct {
			Limits json.RawMessage `json:"limits"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if string(raw.Limits) != c.want {
			t.Errorf("TTL %s: limits %s, want %s", c.ttl, raw.Limits, c.want)
		}
		var in Info
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatal(err)
		}
		if in.Limits == nil || in.Limits.TTL != c.back || in.Limits.MemoryMB != 512 || in.Limits.CPUs != 1.5 {
			t.Errorf("TTL %s: read back %+v", c.ttl, in.Limits)
		}
	}
}
