package session_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// gathered returns the metric family name of reg, or nil.
func gathered(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// sample returns the metric of family f whose labels are all of want.
func sample(f *dto.MetricFamily, want map[string]string) *dto.Metric {
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	m := sample(gathered(t, reg, name), labels)
	if m == nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

func histCount(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) uint64 {
	t.Helper()
	m := sample(gathered(t, reg, name), labels)
	if m == nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

// TestMetrics runs executions and a command on one of two Managers, each
// with a registry of its own, and checks that the first one's metrics
// moved and the second one's did not. Neither has a tracer provider: no
// spans, no crash.
func TestMetrics(t *testing.T) {
	t.Parallel()
	reg1, reg2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	m1 := newManager(t, nil, session.WithMetrics(reg1))
	m2 := newManager(t, nil, session.WithMetrics(reg2))
	ctx := context.Background()
	// The other Manager runs something of its own: its cold start is its own.
	if _, err := m2.Exec(ctx, "other", "1"); err != nil {
		t.Fatal(err)
	}

	for _, code := range []string{"1", "2", "1/0"} {
		if _, err := m1.Exec(ctx, "metered", code); err != nil {
			t.Fatalf("exec %q: %v", code, err)
		}
	}
	if _, err := m1.Exec(ctx, "metered", "open('/session/artifacts/a.txt', 'w').write('abc')"); err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Run(ctx, "metered", session.Command{Line: "exit 3"}); err != nil {
		t.Fatal(err)
	}

	checks := []struct {
		name        string
		labels      map[string]string
		want, other float64 // of m1, of m2
	}{
		{"agentbox_executions_total", map[string]string{"outcome": "ok"}, 3, 1},
		{"agentbox_executions_total", map[string]string{"outcome": "raised"}, 1, 0},
		{"agentbox_commands_total", map[string]string{"kind": "run", "outcome": "failed"}, 1, 0},
		{"agentbox_pool_acquisitions_total", map[string]string{"result": "miss"}, 1, 1},
		{"agentbox_artifacts_ingested_total", nil, 1, 0},
		{"agentbox_artifacts_ingested_bytes_total", nil, 3, 0},
	}
	for _, c := range checks {
		if got := counter(t, reg1, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
		if got := counter(t, reg2, c.name, c.labels); got != c.other {
			t.Errorf("the other Manager's %s%v = %v, want %v", c.name, c.labels, got, c.other)
		}
	}
	hists := []struct {
		name        string
		labels      map[string]string
		want, other uint64
	}{
		{"agentbox_execution_duration_seconds", map[string]string{"outcome": "ok"}, 3, 1},
		{"agentbox_command_duration_seconds", map[string]string{"kind": "run"}, 1, 0},
	}
	for _, h := range hists {
		if got := histCount(t, reg1, h.name, h.labels); got != h.want {
			t.Errorf("%s%v: %d samples, want %d", h.name, h.labels, got, h.want)
		}
		if got := histCount(t, reg2, h.name, h.labels); got != h.other {
			t.Errorf("the other Manager's %s%v: %d samples, want %d", h.name, h.labels, got, h.other)
		}
	}
	for _, reg := range []*prometheus.Registry{reg1, reg2} {
		if got := histCount(t, reg, "agentbox_cold_start_seconds", map[string]string{"kind": "session"}); got != 1 {
			t.Errorf("cold starts: %d samples, want 1 each", got)
		}
	}
	if got := sample(gathered(t, reg1, "agentbox_sessions"), map[string]string{"state": "running"}); got == nil || got.GetGauge().GetValue() != 1 {
		t.Errorf("agentbox_sessions{state=running} = %v, want 1", got)
	}
	if got := sample(gathered(t, reg2, "agentbox_sessions"), map[string]string{"state": "running"}); got == nil || got.GetGauge().GetValue() != 1 {
		t.Errorf("the other Manager's agentbox_sessions{state=running} = %v, want 1", got)
	}
	// The same content again is a dedup hit.
	if _, err := m1.Exec(ctx, "metered", "open('/session/artifacts/b.txt', 'w').write('abc')"); err != nil {
		t.Fatal(err)
	}
	if got := counter(t, reg1, "agentbox_artifacts_dedup_hits_total", nil); got != 1 {
		t.Errorf("dedup hits = %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg1, "agentbox_pool_ready", "agentbox_pool_size"); err != nil || n != 2 {
		t.Errorf("pool gauges: %d, %v", n, err)
	}
}

// TestMetricsRegistryShared refuses a second Manager on a registry that
// holds one's metrics already, before it touches the engine.
func TestMetricsRegistryShared(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "agentbox_executions_total", Help: "taken"}))
	cfg := config.Default()
	cfg.ArtifactsDB = t.TempDir() + "/a.db"
	_, err := session.NewManager(context.Background(), cfg, session.WithMetrics(reg))
	if err == nil || !strings.Contains(err.Error(), "register metrics") || !strings.Contains(err.Error(), "agentbox_executions_total") {
		t.Fatalf("NewManager on a taken registry: %v, want a registration error naming agentbox_executions_total", err)
	}
	// What it registered before the clash is taken back.
	if n, _ := testutil.GatherAndCount(reg); n != 1 {
		t.Errorf("%d metrics left on the registry, want the 1 it had", n)
	}
}
