package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
)

// FromNothingEnv turns on BenchmarkSetup/from-nothing: a build from nothing
// takes minutes, needs root, debootstrap and the Debian archive, so it runs
// only when asked for.
const FromNothingEnv = "AGENTBOX_BENCH_IMAGE_FROM_NOTHING"

// benchSetup runs sandbox-setup in process with args and an --env-file that
// does not exist, failing the benchmark on a non-zero exit.
func benchSetup(b *testing.B, args ...string) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	args = append([]string{"--env-file", filepath.Join(b.TempDir(), "absent.env")}, args...)
	var out, errb bytes.Buffer
	start := time.Now()
	code := run(ctx, args, &out, &errb)
	d := time.Since(start)
	if code != exitOK {
		b.Fatalf("sandbox-setup %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out.String(), errb.String())
	}
	return d
}

// BenchmarkSetup times sandbox-setup. current: the image is current, the
// check make image, make demo and make test start with (reported as
// current-med-ms and current-p90-ms). from-nothing (only with
// AGENTBOX_BENCH_IMAGE_FROM_NOTHING=1): a Debian base bootstrapped with
// debootstrap, then the sandbox image built on it, into a tag of its own
// that is removed afterwards (from-nothing-s). The image sessions use is
// never rebuilt, retagged or removed; the bootstrapped base is tagged as
// sandbox-setup tags it (agentbox-base:<suite>-<packages hash>), the same
// contents as the one it replaces.
func BenchmarkSetup(b *testing.B) {
	b.Run("current", func(b *testing.B) {
		image := dockertest.Image(b) // built and current, or the benchmark fails
		var s dockertest.Samples
		benchSetup(b, "--image", image, "--quiet") // warm the engine connection up
		for range dockertest.Rounds(20, 2) {
			s = append(s, benchSetup(b, "--image", image, "--quiet"))
		}
		dockertest.Report(b, "current", "ms", s, nil)
	})
	b.Run("from-nothing", func(b *testing.B) {
		if os.Getenv(FromNothingEnv) != "1" {
			b.Skipf("set %s=1 to build an image from nothing (minutes; root, debootstrap and the Debian archive)", FromNothingEnv)
		}
		cli := dockertest.Engine(b)
		p := make([]byte, 6)
		rand.Read(p)
		tag := "agentbox-sandbox-bench:" + hex.EncodeToString(p)
		b.Cleanup(func() { _ = cli.RemoveImage(context.Background(), tag) })
		d := benchSetup(b, "--image", tag, "--debootstrap", "--no-pull", "--quiet")
		b.ReportMetric(d.Seconds(), "from-nothing-s")
	})
}
