package kernel_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
)

// BenchmarkScan measures what listing a folder of 1 000 files into the
// result adds to an execution of `pass`, interleaved with plain `pass`. The
// listing resolves every name from a descriptor of the folder: resolved from
// "/", each name cost the sandbox user a permission check through the
// engine's FUSE root file system, 27 ms for the thousand instead of 4.
func BenchmarkScan(b *testing.B) {
	id := dockertest.Sandbox(b, nil)
	c := dockertest.Dial(b, id)
	ctx := context.Background()
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: "import os\nos.makedirs('/session/x', exist_ok=True)\nfor i in range(1000): open(f'/session/x/r-{i:04d}','wb').write(os.urandom(4096))"}, nil)
	if err != nil || res.Error != nil {
		b.Fatal(err, res)
	}
	var plain, scan samples
	for range dockertest.Rounds(50, 1) {
		s := time.Now()
		if _, err := c.Execute(ctx, kernel.ExecRequest{Code: "pass"}, nil); err != nil {
			b.Fatal(err)
		}
		plain = append(plain, time.Since(s))
		s = time.Now()
		r, err := c.Execute(ctx, kernel.ExecRequest{Code: "pass", ScanDir: "/session/x", ScanMax: 10000}, nil)
		scan = append(scan, time.Since(s))
		if err != nil || len(r.Files) != 1000 {
			b.Fatalf("%v: %d files listed, want 1000", err, len(r.Files))
		}
	}
	report(b, "plain", plain, nil)
	report(b, "scan", scan, plain)
}
