package session

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
)

// BenchmarkIntentCost prices the intent row on the hot path: `pass` through
// the Manager as it is, against the same Manager and session with the
// intent write skipped (what Exec cost before intents existed), interleaved
// in one run. Reported: the medians and their ratio, intent/before (goal:
// at most 1.3).
func BenchmarkIntentCost(b *testing.B) {
	cli := dockertest.Engine(b)
	cfg := config.Default()
	dir := b.TempDir()
	cfg.SandboxImage = dockertest.Image(b)
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	ns := "bench-intent-" + filepath.Base(dir)
	ctx := context.Background()
	m, err := NewManager(ctx, cfg, WithNamespace(ns), WithLabels(map[string]string{dockertest.LabelTest: b.Name()}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		m.Close(context.Background())
		dockertest.Sweep(context.Background(), cli, LabelNamespace+"="+ns)
	})
	if _, err := m.Exec(ctx, "k", "pass"); err != nil {
		b.Fatal(err)
	}
	var with, without dockertest.Samples
	warm := dockertest.Rounds(20, 1) // warm-up rounds, dropped
	for i := range warm + dockertest.Rounds(300, 2) {
		for _, skip := range []bool{false, true} {
			m.noIntents = skip
			start := time.Now()
			if _, err := m.Exec(ctx, "k", "pass"); err != nil {
				b.Fatal(err)
			}
			if i >= warm {
				if skip {
					without = append(without, time.Since(start))
				} else {
					with = append(with, time.Since(start))
				}
			}
		}
	}
	m.noIntents = false
	dockertest.Report(b, "before", "µs", without, nil)
	dockertest.Report(b, "intent", "µs", with, without)
}
