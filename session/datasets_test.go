package session_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

type sale struct {
	ID     int64   `parquet:"id"`
	Region string  `parquet:"region"`
	Amount float64 `parquet:"amount,optional"`
}

func parquetBytes(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	rows := []sale{{1, "north", 9.5}, {2, "south", 3}, {3, "east", 7.25}}
	if err := parquet.Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// datasetAPI is an API source that fails in every way the issue lists.
func datasetAPI(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	good := parquetBytes(t)
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/d/")
		switch id {
		case "sales.parquet":
			fetches.Add(1)
			time.Sleep(200 * time.Millisecond) // long enough for two selections to overlap
			w.Write(good)
		case "broken":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "slow":
			time.Sleep(3 * time.Second)
			w.Write(good)
		case "big.bin":
			w.Write(make([]byte, 2<<20))
		case "fake.parquet":
			w.Write([]byte("id,region\n1,north\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &fetches
}

func TestDatasetsFromAPI(t *testing.T) {
	t.Parallel()
	srv, fetches := datasetAPI(t)
	cfg := testConfig(t, func(c *config.Config) {
		c.SessionStorage = config.StorageBind
		c.DatasetAccess = config.AccessAPI
		c.DatasetsAPIURL = srv.URL + "/d/{id}"
		c.DatasetsAPITimeout = time.Second
		c.DatasetMaxMB = 1
		c.DatasetCacheScope = config.CacheShared // a dataset every user may read
	})
	ns := namespace()
	m := managerFor(t, cfg, ns)
	ctx := context.Background()

	// Two sessions select the same shared dataset at once: one fetch.
	var wg sync.WaitGroup
	sels := make([]session.Selection, 2)
	errs := make([]error, 2)
	for i, key := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sels[i], errs[i] = m.SelectDataset(ctx, key, "sales.parquet")
		}()
	}
	wg.Wait()
	for i := range sels {
		if errs[i] != nil || sels[i].Status != datasets.StatusLoaded || sels[i].Path != "/session/data/sales.parquet" {
			t.Fatalf("selection %d: %+v %v", i, sels[i], errs[i])
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for two sessions, want 1", n)
	}
	res := mustExec(t, m, "a", "import pandas as pd\ndf = pd.read_parquet('/session/data/sales.parquet')\nprint(len(df), df['amount'].sum())")
	if strings.TrimSpace(res.Stdout) != "3 19.75" {
		t.Fatalf("pandas read: %q %+v", res.Stdout, res.Error)
	}
	// Selecting a loaded dataset again is a no-op.
	if sel, err := m.SelectDataset(ctx, "a", "sales.parquet"); err != nil || sel.Fetched || sel.Status != datasets.StatusLoaded {
		t.Fatalf("reselect: %+v %v", sel, err)
	}

	failures := map[string]string{
		"broken":       "500",
		"missing":      "404",
		"slow":         "timed out",
		"big.bin":      "too large",
		"fake.parquet": "format",
	}
	for id, want := range failures {
		sel, err := m.SelectDataset(ctx, "a", id)
		if err != nil || sel.Status != datasets.StatusFailed || !strings.Contains(strings.ToLower(sel.Reason), want) {
			t.Errorf("%s: %+v %v, want FAILED naming %q", id, sel, err, want)
		}
	}
	sel, err := m.SelectDataset(ctx, "a", "../../etc/passwd")
	if err == nil && (sel.Status != datasets.StatusFailed || strings.Contains(strings.TrimPrefix(sel.Path, "/session/data/"), "/")) {
		t.Errorf("hostile id: %+v", sel)
	}
	if _, err := m.SelectDataset(ctx, "a", "nul\x00id"); !errors.Is(err, datasets.ErrInvalidID) {
		t.Errorf("NUL id: %v, want ErrInvalidID", err)
	}

	l, err := m.Datasets(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Files) != 1 || l.Files[0].Parquet == nil || l.Files[0].Parquet.Rows != 3 || l.Files[0].Path != "/session/data/sales.parquet" {
		t.Fatalf("listing: %+v", l.Files)
	}
	if data, err := os.ReadFile(filepath.Join(cfg.SessionsRoot, session.ID("a"), session.DatasetsFile)); err != nil || !bytes.Contains(data, []byte("LOADED")) {
		t.Errorf("%s: %s %v", session.DatasetsFile, data, err)
	}

	// Statuses survive a manager restart.
	m.Close(ctx)
	m2 := managerFor(t, cfg, ns)
	l, err = m2.Datasets(ctx, "a")
	if err != nil || len(l.Statuses) != 1+len(failures)+1 {
		t.Fatalf("statuses after restart: %d, %v: %+v", len(l.Statuses), err, l.Statuses)
	}
}

func TestDatasetsLocalReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sales.parquet"), parquetBytes(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "people.csv"), []byte("name,age\nann,31\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, func(c *config.Config) {
		c.DatasetAccess = config.AccessLocalRO
		c.DatasetsHostRO = dir
	})
	res := mustExec(t, m, "l", `
import pandas as pd
print(len(pd.read_parquet('/data/sales.parquet')))
try:
    open('/data/new.txt', 'w')
    print('wrote')
except OSError as e:
    print('refused', e.errno)`)
	if got := strings.Fields(res.Stdout); len(got) != 3 || got[0] != "3" || got[1] != "refused" || got[2] != readOnlyErrno() {
		t.Fatalf("got %q %+v", res.Stdout, res.Error)
	}
	l, err := m.Datasets(context.Background(), "l")
	if err != nil || len(l.Files) != 2 {
		t.Fatalf("listing: %+v %v", l, err)
	}
	if _, err := m.SelectDataset(context.Background(), "l", "x"); !errors.Is(err, session.ErrNoDatasetSource) {
		t.Fatalf("API select in LOCAL_RO: %v", err)
	}
}

func TestExport(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	cfg.ExportDir = filepath.Join(t.TempDir(), "exports")
	artifactServer(t, &cfg)
	m := managerFor(t, cfg, namespace())
	mustExec(t, m, "x", "import os\nos.makedirs('/session/data', exist_ok=True)\nopen('/session/data/result.csv', 'w').write('a,b\\n1,2\\n')")
	ctx := context.Background()
	e1, err := m.Export(ctx, "x", "/session/data/result.csv")
	if err != nil {
		t.Fatal(err)
	}
	e2, err := m.Export(ctx, "x", "/session/data/result.csv")
	if err != nil {
		t.Fatal(err)
	}
	if e1.HostPath == e2.HostPath || filepath.Dir(e1.HostPath) != cfg.ExportDir || !strings.HasPrefix(filepath.Base(e1.HostPath), "result-") || filepath.Ext(e1.HostPath) != ".csv" {
		t.Fatalf("export names: %s, %s", e1.HostPath, e2.HostPath)
	}
	for _, e := range []session.Export{e1, e2} {
		if data, err := os.ReadFile(e.HostPath); err != nil || string(data) != "a,b\n1,2\n" {
			t.Fatalf("%s: %q %v", e.HostPath, data, err)
		}
	}
	if body := download(t, e1.Artifact.URL); string(body) != "a,b\n1,2\n" {
		t.Fatalf("artifact: %q", body)
	}
	for _, bad := range []string{"/etc/passwd", "/session/../etc/passwd", "/session/", "relative.csv", "/session/data/missing.csv"} {
		if _, err := m.Export(ctx, "x", bad); err == nil {
			t.Errorf("export %q worked", bad)
		}
	}
}

func TestDatasetsHybridAndNone(t *testing.T) {
	t.Parallel()
	srv, _ := datasetAPI(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "local.parquet"), parquetBytes(t), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, func(c *config.Config) {
		c.DatasetAccess = config.AccessHybrid
		c.DatasetsHostRO = dir
		c.DatasetsAPIURL = srv.URL + "/d/{id}"
	})
	ctx := context.Background()
	if sel, err := m.SelectDataset(ctx, "h", "sales.parquet"); err != nil || sel.Status != datasets.StatusLoaded {
		t.Fatalf("select: %+v %v", sel, err)
	}
	res := mustExec(t, m, "h", "import pandas as pd\nprint(len(pd.read_parquet('/data/local.parquet')) + len(pd.read_parquet('/session/data/sales.parquet')))")
	if strings.TrimSpace(res.Stdout) != "6" {
		t.Fatalf("hybrid read: %q %+v", res.Stdout, res.Error)
	}
	l, err := m.Datasets(ctx, "h")
	if err != nil || len(l.Files) != 2 || l.Files[0].Source != "local" || l.Files[1].Source != "api" {
		t.Fatalf("hybrid listing: %+v %v", l.Files, err)
	}

	none := newManager(t, func(c *config.Config) { c.DatasetAccess = config.AccessNone })
	l, err = none.Datasets(ctx, "h")
	if err != nil || len(l.Files) != 0 || !strings.Contains(l.Message, "no datasets") {
		t.Fatalf("NONE listing: %+v %v", l, err)
	}
	if _, err := none.SelectDataset(ctx, "h", "sales.parquet"); !errors.Is(err, session.ErrNoDatasetSource) {
		t.Fatalf("select with NONE: %v", err)
	}
}

// TestDatasetStagedThroughTheEngine stages and exports with the files going
// through the engine's exec streams (as with a remote engine), not through
// /proc on this host.
func TestDatasetStagedThroughTheEngine(t *testing.T) {
	t.Parallel()
	srv, _ := datasetAPI(t)
	cfg := testConfig(t, func(c *config.Config) {
		c.DatasetAccess = config.AccessAPI
		c.DatasetsAPIURL = srv.URL + "/d/{id}"
	})
	cfg.ExportDir = filepath.Join(t.TempDir(), "exports")
	d, closer, err := session.NewDockerDriver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	m := managerFor(t, cfg, namespace(), session.WithDriver(streamOnly{d}))
	ctx := context.Background()
	if sel, err := m.SelectDataset(ctx, "r", "sales.parquet"); err != nil || sel.Status != datasets.StatusLoaded {
		t.Fatalf("select: %+v %v", sel, err)
	}
	res := mustExec(t, m, "r", "import pandas as pd\nprint(len(pd.read_parquet('/session/data/sales.parquet')))")
	if strings.TrimSpace(res.Stdout) != "3" {
		t.Fatalf("pandas: %q %+v", res.Stdout, res.Error)
	}
	ex, err := m.Export(ctx, "r", "/session/data/sales.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(ex.HostPath); err != nil || !bytes.Equal(data, parquetBytes(t)) {
		t.Fatalf("export through the engine: %d bytes, %v", len(data), err)
	}
}

// readOnlyErrno is the errno of a write to a read-only mount: EROFS, or
// EACCES under gVisor, which checks permissions first (README, gVisor).
func readOnlyErrno() string {
	if dockertest.IsGVisor() {
		return "13"
	}
	return "30"
}
