package artifacts_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/internal/store"
)

// BenchmarkDownload measures the handler behind a real http.Server on a
// loopback listener, as artifact-server runs it, with every request
// verifying its token:
//
//   - 4KiB: requests per second and p50/p99 latency of downloads of a 4 KiB
//     artifact by benchClients concurrent clients sharing one keep-alive
//     pool, with the in-memory index, so the figure is the handler's;
//   - 4KiB-sqlite: the same with the real Index (SQLite) and Blobstore;
//   - 256MiB: throughput of whole downloads of a 256 MiB artifact, one at a
//     time.
func BenchmarkDownload(b *testing.B) {
	b.Run("4KiB", func(b *testing.B) {
		st := &dlStore{dir: b.TempDir(), arts: map[string]artifacts.Artifact{}}
		st.add(b, "small", "small.bin", "application/octet-stream", benchContent(4<<10))
		benchRequests(b, st, st, "small", 4<<10)
	})
	b.Run("4KiB-sqlite", func(b *testing.B) {
		ctx := context.Background()
		db, err := store.Open(ctx, filepath.Join(b.TempDir(), "agentbox.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		blobs := artifacts.NewBlobstore(filepath.Join(b.TempDir(), "blobs"))
		sha, size, err := blobs.Put(ctx, bytes.NewReader([]byte(benchContent(4<<10))))
		if err != nil {
			b.Fatal(err)
		}
		index := artifacts.NewIndex(db)
		a, err := index.Add(ctx, artifacts.Artifact{SessionID: "s", Name: "small.bin", SHA256: sha, Size: size,
			MIME: "application/octet-stream"})
		if err != nil {
			b.Fatal(err)
		}
		benchRequests(b, index, blobs, a.ID, 4<<10)
	})
	b.Run("256MiB", func(b *testing.B) {
		const size = 256 << 20
		st := &dlStore{dir: b.TempDir(), arts: map[string]artifacts.Artifact{}}
		a := st.add(b, "big", "big.bin", "application/octet-stream", "")
		// Random bytes written in chunks, under the fake's name for them
		// (the hash is not checked on the way out).
		f, err := os.OpenFile(filepath.Join(st.dir, a.SHA256), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.NewChaCha8([32]byte{2})
		if _, err := io.CopyN(f, rng, size); err != nil {
			b.Fatal(err)
		}
		f.Close()
		a.Size = size
		st.arts["big"] = a

		url, client := benchServer(b, st, st, "big", 1)
		b.SetBytes(size)
		start := time.Now()
		for b.Loop() {
			if n := benchGet(b, client, url); n != size {
				b.Fatalf("read %d bytes, want %d", n, size)
			}
		}
		b.ReportMetric(float64(b.N)*size/(1<<20)/time.Since(start).Seconds(), "MiB/s")
	})
}

// benchClients is the number of concurrent clients of the request
// benchmarks: enough to keep both cores of a small machine busy (32 gave
// the same rate with four times the latency, all of it queueing).
const benchClients = 8

// benchRequests runs b.N downloads of artifact id from benchClients
// goroutines and reports requests per second and latency percentiles.
func benchRequests(b *testing.B, index interface {
	Get(context.Context, string) (artifacts.Artifact, error)
}, blobs interface {
	Open(string) (io.ReadSeekCloser, error)
}, id string, size int64) {
	url, client := benchServer(b, index, blobs, id, benchClients)
	benchGet(b, client, url) // warm up the first connection and the page cache

	var next atomic.Int64
	lat := make([][]time.Duration, benchClients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := range benchClients {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t := time.Now()
				if n := benchGet(b, client, url); n != size {
					b.Errorf("read %d bytes, want %d", n, size)
					return
				}
				lat[g] = append(lat[g], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()

	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	pct := func(p float64) float64 { return float64(all[int(float64(len(all)-1)*p)].Microseconds()) }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// benchServer serves the handler on 127.0.0.1:0 and returns a signed URL
// for id and a client pooling up to conns connections.
func benchServer(b *testing.B, index interface {
	Get(context.Context, string) (artifacts.Artifact, error)
}, blobs interface {
	Open(string) (io.ReadSeekCloser, error)
}, id string, conns int) (string, *http.Client) {
	b.Helper()
	signer := tokSigner(b, artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}}, time.Hour)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: artifacts.NewHandler(index, blobs, signer), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, DisableCompression: true}
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			b.Error(err)
		}
	})
	url, _, err := signer.URL("http://"+ln.Addr().String(), id, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return url, &http.Client{Transport: tr}
}

// benchGet downloads url and returns the number of body bytes.
func benchGet(b *testing.B, c *http.Client, url string) int64 {
	resp, err := c.Get(url)
	if err != nil {
		b.Error(err)
		return -1
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Errorf("status %d, %v", resp.StatusCode, err)
		return -1
	}
	return n
}

func benchContent(n int) string {
	return string(bytes.Repeat([]byte("0123456789abcdef"), n/16))
}
