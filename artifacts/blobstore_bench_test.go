package artifacts_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
)

// BenchmarkIngest measures Put of one 256 MiB file and of 1 000 files of
// 4 KiB, read from disk, against the floor of the same run: sha256sum over
// the same files (all small files in one invocation). sha256sum writes
// nothing, so the ratios show what the copy and the fsyncs cost on top of the
// hashing both do. Each round runs the floor right before the Puts, on a warm
// page cache, into a fresh blobstore so that nothing deduplicates; the
// figures are medians of the rounds.
func BenchmarkIngest(b *testing.B) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		b.Skip("needs sha256sum:", err)
	}
	const (
		rounds    = 3
		bigSize   = 256 << 20
		smallN    = 1000
		smallSize = 4 << 10
	)
	dir := b.TempDir()
	rng := rand.NewChaCha8([32]byte{1})
	big := filepath.Join(dir, "big")
	writeRandom(b, rng, big, bigSize)
	var small []string
	for i := range smallN {
		name := filepath.Join(dir, "small", fmt.Sprintf("f%04d", i))
		if i == 0 {
			if err := os.Mkdir(filepath.Dir(name), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		writeRandom(b, rng, name, smallSize)
		small = append(small, name)
	}

	var bigSum, bigPut, smallSum, smallPut []time.Duration
	round := 0
	for b.Loop() {
		for range rounds {
			round++
			bigSum = append(bigSum, timeSHA256Sum(b, big))
			bigPut = append(bigPut, timePut(b, filepath.Join(dir, fmt.Sprint("bs-big-", round)), big))
			smallSum = append(smallSum, timeSHA256Sum(b, small...))
			smallPut = append(smallPut, timePut(b, filepath.Join(dir, fmt.Sprint("bs-small-", round)), small...))
		}
	}
	mb, ms, pb, ps := median(bigSum), median(smallSum), median(bigPut), median(smallPut)
	b.ReportMetric(float64(bigSize>>20)/pb.Seconds(), "big-MiB/s")
	b.ReportMetric(pb.Seconds()/mb.Seconds(), "big/sha256sum")
	b.ReportMetric(float64(smallN)/ps.Seconds(), "small-files/s")
	b.ReportMetric(ps.Seconds()/ms.Seconds(), "small/sha256sum")
}

// writeRandom writes size pseudo-random (incompressible, never deduplicated)
// bytes to name.
func writeRandom(b *testing.B, rng *rand.ChaCha8, name string, size int) {
	b.Helper()
	buf := make([]byte, size)
	rng.Read(buf)
	if err := os.WriteFile(name, buf, 0o644); err != nil {
		b.Fatal(err)
	}
}

// timeSHA256Sum times one sha256sum run over the files.
func timeSHA256Sum(b *testing.B, files ...string) time.Duration {
	b.Helper()
	cmd := exec.Command("sha256sum", files...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("sha256sum: %v\n%.500s", err, out)
	}
	return time.Since(start)
}

// timePut times Puts of the files, one after the other, into a new blobstore
// in dir, then removes it.
func timePut(b *testing.B, dir string, files ...string) time.Duration {
	b.Helper()
	bs := artifacts.NewBlobstore(dir)
	ctx := context.Background()
	start := time.Now()
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		_, _, err = bs.Put(ctx, f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	d := time.Since(start)
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	return d
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
