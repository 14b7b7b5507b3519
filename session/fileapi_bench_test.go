package session_test

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/session"
)

// The files API's floor is the engine's own copy of the same bytes
// (docker cp: CopyToContainer, CopyFromContainer) into and out of a
// container of the same image, measured in the same run, interleaved.

// filesManager is a manager whose /session holds a 500 MiB file.
func filesManager(b *testing.B) *session.Manager {
	return newManager(b, func(c *config.Config) { c.TmpfsSizeMB, c.MemoryMB = 1536, 2048 })
}

// floorContainer runs the sandbox image with a writable root filesystem
// (the engine's copy can write neither a read-only root nor a tmpfs)
// doing nothing; removed when the benchmark ends.
func floorContainer(b *testing.B) (*docker.Client, string) {
	cli := dockertest.Engine(b)
	spec := imagesetup.LockedDown(dockertest.Image(b))
	spec.ReadOnlyRoot = false
	spec.Entrypoint = []string{"sleep", "infinity"}
	spec.MemoryBytes = 2 << 30
	spec.Labels = map[string]string{dockertest.LabelTest: b.Name()}
	ctx := context.Background()
	id, err := cli.CreateContainer(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.RemoveContainer(context.Background(), id) })
	return cli, id
}

// block is random bytes that content readers repeat: incompressible, and
// no time spent making them while measuring.
var block = func() []byte {
	p := make([]byte, 1<<20)
	rand.Read(p)
	return p
}()

// content reads n bytes of block, repeated.
type content struct{ left, off int64 }

func newContent(n int64) *content { return &content{left: n} }

func (c *content) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), c.left)]
	n := copy(p, block[c.off%int64(len(block)):])
	c.off += int64(n)
	c.left -= int64(n)
	return n, nil
}

// tarOf streams a tar of the files (name -> size) made of content.
func tarOf(files []benchFile) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		for _, f := range files {
			if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: f.size, Typeflag: tar.TypeReg, Uid: 1000, Gid: 1000}); err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := io.Copy(tw, newContent(f.size)); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(tw.Close())
	}()
	return pr
}

type benchFile struct {
	name string
	size int64
}

// fileSizes are the sizes measured; under -short (does it still run?) the
// large one is 8 MiB.
func fileSizes() []struct {
	name string
	size int64
	runs int
} {
	return []struct {
		name string
		size int64
		runs int
	}{
		{"1KiB", 1 << 10, 30},
		{"1MiB", 1 << 20, 20},
		{"500MiB", int64(dockertest.Rounds(500<<20, 8<<20)), 3},
	}
}

// BenchmarkFileWrite writes one file of 1 KiB, 1 MiB and 500 MiB into a
// session (WriteFile) against the engine's copy of the same bytes.
func BenchmarkFileWrite(b *testing.B) {
	m := filesManager(b)
	cli, floorID := floorContainer(b)
	ctx := context.Background()
	if _, err := m.Start(ctx, "w"); err != nil {
		b.Fatal(err)
	}
	for _, sz := range fileSizes() {
		b.Run(sz.name, func(b *testing.B) {
			var api, floor samples
			for i := range dockertest.Rounds(sz.runs, 1) + 1 {
				start := time.Now()
				if err := cli.CopyTo(ctx, floorID, "/var/tmp", tarOf([]benchFile{{"f", sz.size}})); err != nil {
					b.Fatal(err)
				}
				f := time.Since(start)
				start = time.Now()
				if _, err := m.WriteFile(ctx, "w", "/session/f", newContent(sz.size), 0); err != nil {
					b.Fatal(err)
				}
				if i > 0 { // the first of each warms both paths up
					floor, api = append(floor, f), append(api, time.Since(start))
				}
			}
			report(b, "docker-cp", floor, nil)
			report(b, "write", api, floor)
			b.ReportMetric(float64(sz.size)/(1<<20)/api.Pct(0.5).Seconds(), "write-MiB/s")
		})
	}
}

// BenchmarkFileRead reads one file of 1 KiB, 1 MiB and 500 MiB out of a
// session (ReadFile, read to the end) against the engine's copy of it out
// of a container.
func BenchmarkFileRead(b *testing.B) {
	m := filesManager(b)
	cli, floorID := floorContainer(b)
	ctx := context.Background()
	for _, sz := range fileSizes() {
		b.Run(sz.name, func(b *testing.B) {
			if err := cli.CopyTo(ctx, floorID, "/var/tmp", tarOf([]benchFile{{"f", sz.size}})); err != nil {
				b.Fatal(err)
			}
			if _, err := m.WriteFile(ctx, "r", "/session/f", newContent(sz.size), 0); err != nil {
				b.Fatal(err)
			}
			var api, floor samples
			for i := range dockertest.Rounds(sz.runs, 1) + 1 {
				start := time.Now()
				rc, err := cli.CopyFrom(ctx, floorID, "/var/tmp/f")
				if err != nil {
					b.Fatal(err)
				}
				tr := tar.NewReader(rc)
				if _, err := tr.Next(); err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, tr); err != nil || n != sz.size {
					b.Fatalf("floor read %d bytes, %v", n, err)
				}
				rc.Close()
				f := time.Since(start)
				start = time.Now()
				r, err := m.ReadFile(ctx, "r", "/session/f", 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, r); err != nil || n != sz.size {
					b.Fatalf("read %d bytes, %v", n, err)
				}
				r.Close()
				if i > 0 {
					floor, api = append(floor, f), append(api, time.Since(start))
				}
			}
			report(b, "docker-cp", floor, nil)
			report(b, "read", api, floor)
			b.ReportMetric(float64(sz.size)/(1<<20)/api.Pct(0.5).Seconds(), "read-MiB/s")
		})
	}
}

// BenchmarkFileWriteMany writes 580 small files (1 to 16 KiB, in 20
// folders, 4.6 MiB in all) in one WriteFiles call against one engine copy
// of a tar of the same files.
func BenchmarkFileWriteMany(b *testing.B) {
	m := filesManager(b)
	cli, floorID := floorContainer(b)
	ctx := context.Background()
	var files []benchFile
	for i := 0; i < 580; i++ {
		files = append(files, benchFile{fmt.Sprintf("d%02d/f%03d.txt", i%20, i), int64(1<<10 + (i*997)%(15<<10))})
	}
	var api, floor samples
	for i := range dockertest.Rounds(10, 1) + 1 { // the first warms both paths up
		start := time.Now()
		if err := cli.CopyTo(ctx, floorID, "/var/tmp", tarOf(files)); err != nil {
			b.Fatal(err)
		}
		f := time.Since(start)
		writes := make([]session.FileWrite, len(files))
		for j, fl := range files {
			writes[j] = session.FileWrite{Path: "/session/many/" + fl.name, Data: newContent(fl.size)}
		}
		start = time.Now()
		res, err := m.WriteFiles(ctx, "many", writes)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		if i > 0 {
			floor, api = append(floor, f), append(api, d)
		}
	}
	report(b, "docker-cp", floor, nil)
	report(b, "write580", api, floor)
}
