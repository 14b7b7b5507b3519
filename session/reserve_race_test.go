package session_test

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
)

// TestArtifactsKeepReserveTogether: sessions whose executions end at the
// same time share one reserve. Each ingestion that reads the free space
// and then writes must count what the others are writing meanwhile, or
// four sessions each allowed the room left store four times it and take
// the reserve (here the whole file system) from the database.
func TestArtifactsKeepReserveTogether(t *testing.T) {
	blobs := t.TempDir()
	mountTmpfsRoot(t, blobs, "64m")
	const reserveMB = 32
	cfg := testConfig(t, func(c *config.Config) {
		c.BlobstoreDir = blobs
		c.DiskReserveMB = reserveMB
	})
	m := managerFor(t, cfg, namespace())
	keys := []string{"r1", "r2", "r3", "r4"}
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() { defer wg.Done(); mustExec(t, m, k, "pass") }()
	}
	wg.Wait()
	// 20 MiB each, different bytes (no deduplication), all ending at once.
	at := float64(time.Now().Add(3*time.Second).UnixNano()) / 1e9
	code := fmt.Sprintf("import os, time\nopen('/session/artifacts/big.bin', 'wb').write(os.urandom(20 << 20))\ntime.sleep(max(0, %f - time.time()))", at)
	results := make([]*session.Result, len(keys))
	for i, k := range keys {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = mustExec(t, m, k, code) }()
	}
	wg.Wait()
	stored := 0
	for i, res := range results {
		stored += len(res.Artifacts)
		t.Logf("%s: stored %d, skipped %+v", keys[i], len(res.Artifacts), res.SkippedArtifacts)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(blobs, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize >> 20
	if stored > 1 || free < reserveMB {
		t.Fatalf("four 20 MiB artifacts at once with 32 MiB above a %d MiB reserve: %d stored, %d MiB left free", reserveMB, stored, free)
	}
}
