package session_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

type samples = dockertest.Samples

func report(b *testing.B, name string, s, floor samples) {
	dockertest.Report(b, name, "ms", s, floor)
}

// coldFloor is the floor of a cold start: create and start a container of
// the same image and shape running `python3 -c pass`, until it exits.
func coldFloor(b *testing.B) time.Duration { return coldFloorOn(b, "") }

// coldFloorOn is coldFloor under an OCI runtime ("" for the engine's default).
func coldFloorOn(b *testing.B, runtime string) time.Duration {
	cli := dockertest.Engine(b)
	spec := imagesetup.LockedDown(dockertest.Image(b))
	spec.Runtime = runtime
	spec.Entrypoint = []string{"python3", "-c", "pass"}
	spec.Labels = map[string]string{dockertest.LabelTest: b.Name()}
	ctx := context.Background()
	start := time.Now()
	id, err := cli.CreateContainer(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	if code, err := cli.Wait(ctx, id); err != nil || code != 0 {
		b.Fatalf("floor container: exit %d, %v", code, err)
	}
	d := time.Since(start)
	if err := cli.RemoveContainer(ctx, id); err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkColdStart measures a new session's first result (container
// create, start, kernel connect, `pass`) against the floor, interleaved.
func BenchmarkColdStart(b *testing.B) {
	m := newManager(b, nil)
	ctx := context.Background()
	var floor, cold samples
	for i := range dockertest.Rounds(10, 1) {
		floor = append(floor, coldFloor(b))
		key := fmt.Sprintf("cold-%d", i)
		start := time.Now()
		if _, err := m.Exec(ctx, key, "pass"); err != nil {
			b.Fatal(err)
		}
		cold = append(cold, time.Since(start))
		if err := m.Stop(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
	report(b, "floor", floor, nil)
	report(b, "cold", cold, floor)
}

// BenchmarkColdStartRuntimes measures a new session's first result under
// runc and under gVisor (runsc) side by side, interleaved, against the same
// floor (create + start of `python3 -c pass` under runc); the floor under
// gVisor is reported too. Skipped when the engine has no runsc.
func BenchmarkColdStartRuntimes(b *testing.B) {
	if !dockertest.HasRuntime(b, "runsc") {
		b.Skip("the engine has no runsc runtime (.ci/run registers it)")
	}
	runc := newManager(b, func(c *config.Config) { c.Runtime = "" })
	runsc := newManager(b, func(c *config.Config) { c.Runtime = "runsc" })
	ctx := context.Background()
	cold := func(m *session.Manager, key string) time.Duration {
		start := time.Now()
		if _, err := m.Exec(ctx, key, "pass"); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		if err := m.Stop(ctx, key); err != nil {
			b.Fatal(err)
		}
		return d
	}
	var floor, floorG, coldR, coldG samples
	for i := range dockertest.Rounds(8, 1) {
		key := fmt.Sprintf("cold-%d", i)
		floor = append(floor, coldFloorOn(b, ""))
		floorG = append(floorG, coldFloorOn(b, "runsc"))
		coldR = append(coldR, cold(runc, key))
		coldG = append(coldG, cold(runsc, key))
	}
	report(b, "floor", floor, nil)
	report(b, "floorRunsc", floorG, floor)
	report(b, "runc", coldR, floor)
	report(b, "runsc", coldG, floor)
	b.ReportMetric(float64(coldG.Pct(0.5))/float64(coldR.Pct(0.5)), "runsc/runc")
}

// BenchmarkWarmAcquire measures a new key's first result when a warm
// container waits (goal: under 20 ms median, 10× faster than a cold start).
func BenchmarkWarmAcquire(b *testing.B) {
	cfg := testConfig(b, func(c *config.Config) { c.PoolSize = 1 })
	m := managerFor(b, cfg, namespace())
	ctx := context.Background()
	var warm, cold samples
	for i := range dockertest.Rounds(10, 1) {
		for deadline := time.Now().Add(time.Minute); m.PoolReady() < 1; {
			if time.Now().After(deadline) {
				b.Fatal("pool never refilled")
			}
			time.Sleep(20 * time.Millisecond)
		}
		key := fmt.Sprintf("warm-%d", i)
		start := time.Now()
		if _, err := m.Exec(ctx, key, "pass"); err != nil {
			b.Fatal(err)
		}
		warm = append(warm, time.Since(start))
		if err := m.Stop(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
	// Cold starts in the same run, the pool being empty right after a take.
	mc := newManager(b, nil)
	for i := range dockertest.Rounds(5, 1) {
		key := fmt.Sprintf("cold-%d", i)
		start := time.Now()
		if _, err := mc.Exec(ctx, key, "pass"); err != nil {
			b.Fatal(err)
		}
		cold = append(cold, time.Since(start))
		mc.Stop(ctx, key)
	}
	report(b, "warm", warm, nil)
	report(b, "cold", cold, nil)
	b.ReportMetric(float64(cold.Pct(0.5))/float64(warm.Pct(0.5)), "cold/warm")
}

// BenchmarkExecRoundTrip measures `pass` through the Manager against the
// same kernel reached directly by a kernel client, interleaved.
func BenchmarkExecRoundTrip(b *testing.B) {
	m := newManager(b, nil)
	ctx := context.Background()
	info, err := m.Start(ctx, "rt")
	if err != nil {
		b.Fatal(err)
	}
	c := dockertest.Dial(b, info.ContainerID)
	var direct, viaManager samples
	warm := dockertest.Rounds(20, 1) // warm-up rounds, dropped
	for i := 0; i < warm+dockertest.Rounds(200, 2); i++ {
		start := time.Now()
		if _, err := c.Execute(ctx, kernel.ExecRequest{Code: "pass"}, nil); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		start = time.Now()
		if _, err := m.Exec(ctx, "rt", "pass"); err != nil {
			b.Fatal(err)
		}
		if i >= warm {
			direct, viaManager = append(direct, d), append(viaManager, time.Since(start))
		}
	}
	report(b, "kernel", direct, nil)
	report(b, "manager", viaManager, direct)
}

// BenchmarkIdleMemory reports what an idle session uses with nothing
// imported (goal: under 40 MiB).
func BenchmarkIdleMemory(b *testing.B) {
	m := newManager(b, nil)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := m.Exec(ctx, fmt.Sprintf("idle-%d", i), "pass"); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	list, err := m.List(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var mem []int64
	for _, in := range list {
		mem = append(mem, in.MemoryBytes)
	}
	slices.Sort(mem)
	b.ReportMetric(float64(mem[len(mem)/2])/(1<<20), "idle-MiB")
}

// BenchmarkFiftySessions creates 50 sessions at once, each computing
// sum(range(10**6)): total time and errors (goal: none). Under -short, 5.
func BenchmarkFiftySessions(b *testing.B) {
	m := newManager(b, nil)
	n := dockertest.Rounds(50, 5)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var each samples
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			t0 := time.Now()
			res, err := m.Exec(ctx, fmt.Sprintf("many-%d", i), "sum(range(10**6))")
			mu.Lock()
			defer mu.Unlock()
			each = append(each, time.Since(t0))
			if err == nil && (res.Error != nil || plain(res) != "499999500000") {
				err = fmt.Errorf("wrong result %+v", res)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	total := time.Since(start)
	for _, err := range errs {
		b.Log(err)
	}
	b.ReportMetric(total.Seconds(), "total-s")
	b.ReportMetric(float64(len(errs)), "errors")
	report(b, "each", each, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := m.StopAll(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkIngest measures what ingesting artifacts adds to an execution:
// the same code writes the same files into /session/artifacts (ingested)
// and into another folder (not), and the difference is set against
// sha256sum over the same bytes on the host, in the same run.
func BenchmarkIngest(b *testing.B) {
	cases := []struct {
		name                string
		files, size, rounds int
	}{
		// Under -short (does it still run?), one round of a smaller file.
		{"big", 1, dockertest.Rounds(256<<20, 8<<20), dockertest.Rounds(3, 1)},
		// More rounds: a few tens of milliseconds each, and sha256sum's own
		// time varies by half from one to the next on this machine.
		{"small", 1000, 4 << 10, dockertest.Rounds(7, 1)},
	}
	cfg := testConfig(b, func(c *config.Config) {
		c.TmpfsSizeMB = 1024
		c.MemoryMB = 2048
		c.ArtifactMaxFileMB = 512
		c.ArtifactMaxFiles = 2000
		c.ArtifactMaxSessionMB = 0
	})
	m := managerFor(b, cfg, namespace())
	ctx := context.Background()
	for _, c := range cases {
		dir := b.TempDir()
		var names []string
		data := make([]byte, c.size)
		for i := 0; i < c.files; i++ {
			rand.Read(data)
			name := filepath.Join(dir, fmt.Sprintf("f%04d", i))
			if err := os.WriteFile(name, data, 0o644); err != nil {
				b.Fatal(err)
			}
			names = append(names, name)
		}
		// The session starts here, not in the first round's timing.
		if _, err := m.Exec(ctx, "ingest-"+c.name, "pass"); err != nil {
			b.Fatal(err)
		}
		var ingest, plain, sum samples
		for round := range c.rounds {
			code := func(folder string) string {
				return fmt.Sprintf(`import os
d = %q
os.makedirs(d, exist_ok=True)
for i in range(%d):
    open(f"{d}/r%d-{i:04d}", "wb").write(os.urandom(%d))`, folder, c.files, round, c.size)
			}
			start := time.Now()
			res, err := m.Exec(ctx, "ingest-"+c.name, code("/session/other"))
			if err != nil || res.Error != nil {
				b.Fatal(err, res.Error)
			}
			plain = append(plain, time.Since(start))
			start = time.Now()
			res, err = m.Exec(ctx, "ingest-"+c.name, code("/session/artifacts"))
			if err != nil || res.Error != nil || len(res.Artifacts) != c.files {
				b.Fatalf("%v %+v: %d artifacts, skipped %v", err, res.Error, len(res.Artifacts), res.SkippedArtifacts)
			}
			ingest = append(ingest, time.Since(start))
			// The small files' own blob files are made in the background:
			// not while the floor is timed.
			if err := artifacts.NewBlobstore(cfg.BlobstoreDir).Flush(ctx); err != nil {
				b.Fatal(err)
			}
			start = time.Now()
			if out, err := exec.Command("sha256sum", names...).CombinedOutput(); err != nil {
				b.Fatalf("sha256sum: %v %s", err, out)
			}
			sum = append(sum, time.Since(start))
			if _, err := m.Exec(ctx, "ingest-"+c.name, "import shutil\nshutil.rmtree('/session/artifacts')\nshutil.rmtree('/session/other')"); err != nil {
				b.Fatal(err)
			}
		}
		// Each round's three timings are close in time, so the ratio is
		// taken per round, and its median reported: the machine's noise
		// comes and goes between rounds.
		var extra, ratios []float64
		for i := range ingest {
			e := float64(ingest[i] - plain[i])
			extra = append(extra, e/float64(time.Millisecond))
			ratios = append(ratios, e/float64(sum[i]))
		}
		b.ReportMetric(medianOf(extra), c.name+"-ingest-ms")
		b.ReportMetric(float64(sum.Pct(0.5).Microseconds())/1000, c.name+"-sha256sum-ms")
		b.ReportMetric(medianOf(ratios), c.name+"/sha256sum")
	}
}

// BenchmarkDatasetStage stages a 100 MiB Parquet file from an API source
// into a session (fetch, cache, copy), then into a second session from the
// cache, against the floor: the same bytes copied into the same container
// through the engine (docker exec stdin), in the same run.
func BenchmarkDatasetStage(b *testing.B) {
	type row struct {
		ID      int64  `parquet:"id"`
		Payload string `parquet:"payload"`
	}
	rows := make([]row, 0, dockertest.Rounds(1<<20, 1<<14)) // about 100 MiB; under -short 1.6
	buf := make([]byte, 48)
	for i := 0; len(rows) < cap(rows); i++ {
		rand.Read(buf)
		rows = append(rows, row{int64(i), hex.EncodeToString(buf)})
	}
	var data bytes.Buffer
	if err := parquet.Write(&data, rows, parquet.Compression(&parquet.Uncompressed)); err != nil {
		b.Fatal(err)
	}
	payload := data.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(payload) }))
	defer srv.Close()
	m := newManager(b, func(c *config.Config) {
		c.DatasetAccess = config.AccessAPI
		c.DatasetsAPIURL = srv.URL + "/{id}"
		c.DatasetCacheScope = config.CacheShared // the cache-hit row stages into another key's session
		c.TmpfsSizeMB = 1024
		c.MemoryMB = 2048
	})
	d, closer, err := session.NewDockerDriver()
	if err != nil {
		b.Fatal(err)
	}
	defer closer.Close()
	w := d.(interface {
		WriteFile(ctx context.Context, id, user, path string, r io.Reader) error
	})
	ctx := context.Background()
	var floor, fetch, hit samples
	for i := range dockertest.Rounds(3, 1) {
		key := fmt.Sprintf("stage-%d", i)
		info, err := m.Start(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		// As the sandbox user, the way staging writes (config.Default().User).
		if err := w.WriteFile(ctx, info.ContainerID, config.Default().User, "/session/floor.bin", bytes.NewReader(payload)); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(start))
		id := fmt.Sprintf("big-%d.parquet", i)
		start = time.Now()
		sel, err := m.SelectDataset(ctx, key, id)
		if err != nil || sel.Status != "LOADED" || !sel.Fetched {
			b.Fatalf("%+v %v", sel, err)
		}
		fetch = append(fetch, time.Since(start))
		if _, err := m.Start(ctx, key+"-again"); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		sel, err = m.SelectDataset(ctx, key+"-again", id)
		if err != nil || sel.Status != "LOADED" || sel.Fetched {
			b.Fatalf("cache hit: %+v %v", sel, err)
		}
		hit = append(hit, time.Since(start))
		m.Stop(ctx, key)
		m.Stop(ctx, key+"-again")
	}
	b.ReportMetric(float64(len(payload))/(1<<20), "MiB")
	report(b, "floor", floor, nil)
	report(b, "fetch+stage", fetch, floor)
	report(b, "cachehit", hit, floor)
}

// medianOf returns the median of xs (the upper one of an even count).
func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
