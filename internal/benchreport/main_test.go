package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sample is go test -bench output in its real shapes: two packages, the
// -GOMAXPROCS suffix, sub-benchmarks, a benchmark's log between its name
// and its figures, a skip with its reason, a failure, --- BENCH logs.
const sample = `goos: linux
goarch: amd64
pkg: github.com/agentbox/agentbox/kernel
cpu: AMD EPYC
BenchmarkRoundTrip-2   	       1	6047771337 ns/op	       372.0 floor-med-µs	       550.0 floor-p90-µs	       690.0 pass-med-µs	       926.0 pass-p90-µs	         1.855 pass/floor
BenchmarkRoundTripRuntimes-2   	--- SKIP: BenchmarkRoundTripRuntimes-2
    bench_test.go:90: the engine has no runsc runtime (.ci/run registers it)
BenchmarkOutput1MiB-2          	time=2026-11-24T06:00:00Z level=INFO msg="a log line"
       1	1234 ns/op	     16700 out1MiB-med-µs	         2.100 out1MiB/floor
PASS
ok  	github.com/agentbox/agentbox/kernel	12.345s
pkg: github.com/agentbox/agentbox/session
BenchmarkFileWrite/1KiB-2         	       1	2000000000 ns/op	        82.00 docker-cp-med-ms	        88.00 write-med-ms	         1.850 write/floor	         0.01200 write-MiB/s
BenchmarkServeConcurrentSessions-2   	       1	9000 ns/op	      1453 library-req/s
--- BENCH: BenchmarkServeConcurrentSessions-2
    bench_test.go:197: 10 sessions, 30 calls each
BenchmarkIngest-2   	--- FAIL: BenchmarkIngest-2
    bench_test.go:300: sha256sum: exit status 1
FAIL
exit status 1
FAIL	github.com/agentbox/agentbox/session	3.2s
pkg: github.com/agentbox/agentbox/datasets
BenchmarkDescribeDir/rowgroups=1-2         	     325	   6500000 ns/op
BenchmarkDescribeDir/rowgroups=100-2       	      30	  70000000 ns/op	 1.5e+03 B/op
`

func TestParse(t *testing.T) {
	out, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Result{
		"kernel.RoundTrip": {Key: "kernel.RoundTrip", N: 1, Metrics: map[string]float64{"ns/op": 6047771337,
			"floor-med-µs": 372, "floor-p90-µs": 550, "pass-med-µs": 690, "pass-p90-µs": 926, "pass/floor": 1.855}},
		"kernel.Output1MiB": {Key: "kernel.Output1MiB", N: 1, Metrics: map[string]float64{"ns/op": 1234,
			"out1MiB-med-µs": 16700, "out1MiB/floor": 2.1}},
		"session.FileWrite/1KiB": {Key: "session.FileWrite/1KiB", N: 1, Metrics: map[string]float64{"ns/op": 2e9,
			"docker-cp-med-ms": 82, "write-med-ms": 88, "write/floor": 1.85, "write-MiB/s": 0.012}},
		"session.ServeConcurrentSessions":    {Key: "session.ServeConcurrentSessions", N: 1, Metrics: map[string]float64{"ns/op": 9000, "library-req/s": 1453}},
		"datasets.DescribeDir/rowgroups=1":   {Key: "datasets.DescribeDir/rowgroups=1", N: 325, Metrics: map[string]float64{"ns/op": 6.5e6}},
		"datasets.DescribeDir/rowgroups=100": {Key: "datasets.DescribeDir/rowgroups=100", N: 30, Metrics: map[string]float64{"ns/op": 7e7, "B/op": 1500}},
	}
	if !reflect.DeepEqual(out.Results, want) {
		t.Errorf("results:\n got %v\nwant %v", out.Results, want)
	}
	if want := []string{"kernel.RoundTripRuntimes: the engine has no runsc runtime (.ci/run registers it)"}; !slices.Equal(out.Skipped, want) {
		t.Errorf("skipped %q, want %q", out.Skipped, want)
	}
	if want := []string{"session.Ingest"}; !slices.Equal(out.Failed, want) {
		t.Errorf("failed %q, want %q", out.Failed, want)
	}
}

func TestParseIgnoresWhatIsNotAResult(t *testing.T) {
	for _, in := range []string{
		"",
		"BenchmarkX-2\n",                  // a name, never its figures
		"BenchmarkX-2 \t 1\t12 ns/op 3\n", // odd pairs
		"BenchmarkX-2 \t 1\t12 ns/op abc floor\n", // a value that is no number
		"Benchmarks are fun\n   1 thing\n",        // prose
		"  7 12 ns/op\n",                          // figures with no name before them
	} {
		out, err := Parse(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Results) != 0 {
			t.Errorf("%q: results %v, want none", in, out.Results)
		}
	}
}

func TestKey(t *testing.T) {
	for _, tt := range []struct{ pkg, name, want string }{
		{"github.com/agentbox/agentbox/kernel", "BenchmarkRoundTrip-2", "kernel.RoundTrip"},
		{"github.com/agentbox/agentbox/kernel", "BenchmarkRoundTrip", "kernel.RoundTrip"}, // GOMAXPROCS=1: no suffix
		{"github.com/agentbox/agentbox/artifacts", "BenchmarkDownload/4KiB-sqlite-16", "artifacts.Download/4KiB-sqlite"},
		{"github.com/agentbox/agentbox/artifacts", "BenchmarkDownload/4KiB-sqlite", "artifacts.Download/4KiB-sqlite"},
		{"github.com/agentbox/agentbox/cmd/sandbox-setup", "BenchmarkSetup/current-2", "sandbox-setup.Setup/current"},
		{"github.com/agentbox/agentbox/datasets", "BenchmarkDescribeDir/rowgroups=100-2", "datasets.DescribeDir/rowgroups=100"},
	} {
		if got := Key(tt.pkg, tt.name); got != tt.want {
			t.Errorf("Key(%q, %q) = %q, want %q", tt.pkg, tt.name, got, tt.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{Us(372.4), "372 µs"},
		{Us(87.54), "87.5 µs"},
		{Us(5.0), "5 µs"},
		{Us(999.4), "999 µs"},
		{Us(999.6), "1 ms"},
		{Us(16700), "16.7 ms"},
		{Ms(1.45), "1.45 ms"},
		{Ms(2.6), "2.6 ms"},
		{Ms(2.604), "2.6 ms"},
		{Ms(472.3), "472 ms"},
		{Ms(1340), "1.34 s"},
		{Ms(999.7), "1 s"},
		{Sec(24.94), "24.9 s"},
		{Sec(0.015), "15 ms"},
		{Sec(161), "2 min 41 s"},
		{Sec(59.7), "1 min 0 s"},
		{Sec(3725), "62 min 5 s"},
		{Ratio(1.8549), "1.85×"},
		{Ratio(1.0), "1×"},
		{Ratio(2.1), "2.1×"},
		{Ratio(0.4712), "0.47×"},
		{Ratio(62.4), "62×"},
		{Ratio(9.96), "10×"},
		{Ratio(1234), "1 234×"},
		{Rate(1453.4, "req/s"), "1 453 req/s"},
		{Rate(12325, "req/s"), "12 325 req/s"},
		{Rate(374.2, "MiB/s"), "374 MiB/s"},
		{Rate(0, "errors"), "0 errors"},
		{Rate(1234567, "x"), "1 234 567 x"},
		{Rate(-1500, "x"), "-1 500 x"},
		{MiB(25.3), "25.3 MiB"},
		{MiB(104.9), "105 MiB"},
		{Dur(0), "0 µs"},
		{Ms(-9.108), "-9.11 ms"},
		{Us(-5), "-5 µs"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

const doc = `# T

## Performance

Prose before.

<!-- bench:kernel -->
| what | median |
| --- | --- |
| old | 1 µs |
<!-- /bench -->

Prose between.

<!-- bench:serve -->
<!-- /bench -->
Prose after.
`

func TestSplice(t *testing.T) {
	got, err := Splice(doc, "kernel", "| what | median |\n| --- | --- |\n| new | 2 µs |\n")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(doc, "| old | 1 µs |", "| new | 2 µs |", 1)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	again, err := Splice(got, "kernel", "| what | median |\n| --- | --- |\n| new | 2 µs |\n")
	if err != nil || again != got {
		t.Fatalf("splicing twice changed it (%v):\n%s", err, again)
	}
	got, err = Splice(doc, "serve", "\n\nbody\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(doc, "<!-- bench:serve -->\n<!-- /bench -->", "<!-- bench:serve -->\nbody\n<!-- /bench -->", 1); got != want {
		t.Fatalf("empty region: got\n%s\nwant\n%s", got, want)
	}
}

func TestSpliceErrors(t *testing.T) {
	for _, tt := range []struct{ doc, name, want string }{
		{doc, "files", "no <!-- bench:files --> marker"},
		{"<!-- bench:kernel -->\n| a |\n", "kernel", "<!-- bench:kernel --> has no <!-- /bench --> after it"},
		{"<!-- bench:kernel -->\n<!-- /bench -->\n<!-- bench:kernel -->\n<!-- /bench -->\n", "kernel", "<!-- bench:kernel --> appears twice"},
		{"<!-- bench:kernel -->\n<!-- bench:serve -->\n<!-- /bench -->\n", "kernel", "<!-- bench:kernel --> is not closed by <!-- /bench --> before the next table's marker"},
		{"<!-- /bench -->\n<!-- bench:kernel -->\n", "kernel", "<!-- bench:kernel --> has no <!-- /bench --> after it"},
	} {
		_, err := Splice(tt.doc, tt.name, "x")
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q in %q: error %v, want %q", tt.name, tt.doc, err, tt.want)
		}
	}
}

// testTable has a row of each kind: plain, optional.
var testTable = Table{
	Name: "kernel", Packages: []string{"./kernel"}, Bench: "^BenchmarkRoundTrip$", Benchtime: "1x",
	Header: []string{"what", "median", "vs floor"},
	Rows: []Row{
		{What: "`pass`", Cells: func(g *Get) []string {
			return []string{Us(g.V("kernel.RoundTrip", "pass-med-µs")), Ratio(g.V("kernel.RoundTrip", "pass/floor"))}
		}},
		{What: "from nothing", Optional: "BUILD_IT", Cells: func(g *Get) []string {
			return []string{Sec(g.V("kernel.Build", "s")), ""}
		}},
	},
}

func TestRender(t *testing.T) {
	full := Output{Results: map[string]Result{
		"kernel.RoundTrip": {Metrics: map[string]float64{"pass-med-µs": 690, "pass/floor": 1.855}},
		"kernel.Build":     {Metrics: map[string]float64{"s": 161}},
	}}
	old := "\n| what | median | vs floor |\n| --- | --- | --- |\n| `pass` | 1 µs | 1× |\n| from nothing | 3 min 0 s | |\n"
	for _, tt := range []struct {
		name          string
		out           Output
		old           string
		md            string
		missing, kept []string
	}{
		{"all measured", full, old,
			"| what | median | vs floor |\n| --- | --- | --- |\n| `pass` | 690 µs | 1.85× |\n| from nothing | 2 min 41 s | |\n", nil, nil},
		{"optional row kept", Output{Results: map[string]Result{"kernel.RoundTrip": full.Results["kernel.RoundTrip"]}}, old,
			"| what | median | vs floor |\n| --- | --- | --- |\n| `pass` | 690 µs | 1.85× |\n| from nothing | 3 min 0 s | |\n", nil, []string{"from nothing"}},
		{"optional row never measured", Output{Results: map[string]Result{"kernel.RoundTrip": full.Results["kernel.RoundTrip"]}}, "",
			"| what | median | vs floor |\n| --- | --- | --- |\n| `pass` | 690 µs | 1.85× |\n", nil, nil},
		{"a metric missing", Output{Results: map[string]Result{"kernel.RoundTrip": {Metrics: map[string]float64{"pass-med-µs": 690}}}}, old,
			"", []string{`"` + "`pass`" + `": kernel.RoundTrip pass/floor`}, []string{"from nothing"}},
		{"a benchmark missing", Output{}, old,
			"", []string{`"` + "`pass`" + `": kernel.RoundTrip (no result)`}, []string{"from nothing"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			md, missing, kept := testTable.Render(tt.out, tt.old)
			if len(tt.missing) == 0 && md != tt.md {
				t.Errorf("markdown:\n%s\nwant\n%s", md, tt.md)
			}
			if !slices.Equal(missing, tt.missing) || !slices.Equal(kept, tt.kept) {
				t.Errorf("missing %q kept %q, want %q and %q", missing, kept, tt.missing, tt.kept)
			}
		})
	}
}

func TestRenderWrongCellCount(t *testing.T) {
	tb := Table{Name: "x", Header: []string{"what", "a", "b"}, Rows: []Row{{What: "r", Cells: func(*Get) []string { return []string{"1"} }}}}
	_, missing, _ := tb.Render(Output{}, "")
	if want := []string{`"r": 1 cells for 2 columns (a bug in its definition)`}; !slices.Equal(missing, want) {
		t.Errorf("missing %q, want %q", missing, want)
	}
}

// needs returns every benchmark and metric a table's rows read.
func needs(t Table) map[string][]string {
	need := map[string][]string{}
	for _, r := range t.Rows {
		g := &Get{out: Output{Results: map[string]Result{}}}
		r.Cells(g)
		for _, m := range g.missing {
			bench := strings.TrimSuffix(m, " (no result)")
			need[bench] = need[bench]
		}
	}
	// Now with every benchmark present, each row reports the metrics.
	res := map[string]Result{}
	for b := range need {
		res[b] = Result{Metrics: map[string]float64{}}
	}
	for _, r := range t.Rows {
		g := &Get{out: Output{Results: res}}
		r.Cells(g)
		for _, m := range g.missing {
			bench, unit, _ := strings.Cut(m, " ")
			need[bench] = append(need[bench], unit)
		}
	}
	return need
}

// fullOutput is a run of t in which every metric it reads is 1.5.
func fullOutput(t Table) Output {
	out := Output{Results: map[string]Result{}}
	for b, units := range needs(t) {
		r := Result{Key: b, N: 1, Metrics: map[string]float64{}}
		for _, u := range units {
			r.Metrics[u] = 1.5
		}
		out.Results[b] = r
	}
	return out
}

func TestTables(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tb := range Tables() {
		if names[tb.Name] {
			t.Errorf("table %s defined twice", tb.Name)
		}
		names[tb.Name] = true
		if _, _, _, err := Region(string(readme), tb.Name); err != nil {
			t.Errorf("README.md: %v", err)
		}
		if len(tb.Packages) == 0 || tb.Bench == "" || tb.Benchtime == "" {
			t.Errorf("table %s: no command: %q", tb.Name, tb.Command(false))
		}
		md, missing, kept := tb.Render(fullOutput(tb), "")
		if len(missing) > 0 || len(kept) > 0 {
			t.Errorf("table %s with every metric: missing %q, kept %q", tb.Name, missing, kept)
		}
		if rows := strings.Count(md, "\n"); rows != len(tb.Rows)+2 {
			t.Errorf("table %s: %d lines for %d rows:\n%s", tb.Name, rows, len(tb.Rows), md)
		}
		for _, r := range tb.Rows {
			if !strings.Contains(md, "| "+r.What+" |") {
				t.Errorf("table %s: no row %q in\n%s", tb.Name, r.What, md)
			}
		}
	}
}

func TestCommand(t *testing.T) {
	tb := Table{Packages: []string{"./kernel", "./session"}, Bench: "^Benchmark(A|B)$", Benchtime: "2s"}
	if got, want := tb.Command(false), `go test -p 1 -run '^$' -bench '^Benchmark(A|B)$' -benchtime 2s -timeout 30m ./kernel ./session`; got != want {
		t.Errorf("command %s\n    want %s", got, want)
	}
	if got, want := tb.Command(true), `go test -p 1 -run '^$' -bench '^Benchmark(A|B)$' -benchtime 1x -timeout 30m -short ./kernel ./session`; got != want {
		t.Errorf("short command %s\n          want %s", got, want)
	}
	tb.Bench = "it's"
	if got := tb.Command(false); !strings.Contains(got, `-bench 'it'\''s'`) {
		t.Errorf("quote not escaped: %s", got)
	}
}

func TestCPUModel(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC  7B13 64-Core Processor\nmodel name\t: other\n", "AMD EPYC 7B13 64-Core Processor"},
		{"processor\t: 0\n", "unknown CPU"},
		{"", "unknown CPU"},
	} {
		if got := cpuModel(tt.in); got != tt.want {
			t.Errorf("cpuModel(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// fakeTest answers each table's command with canned output.
type fakeTest struct {
	out   map[string]string // by the -bench regexp
	err   map[string]error
	calls []string
	lacks []string // runtimes the fake engine does not have
}

func (f *fakeTest) has(_ context.Context, name string) (bool, error) {
	return !slices.Contains(f.lacks, name), nil
}

func (f *fakeTest) run(_ context.Context, args []string, log io.Writer) ([]byte, error) {
	bench := args[slices.Index(args, "-bench")+1]
	f.calls = append(f.calls, strings.Join(args, " "))
	io.WriteString(log, f.out[bench])
	return []byte(f.out[bench]), f.err[bench]
}

func host(context.Context) string { return "Test CPU, 2 cores, Docker 1.0" }

// withTables runs run over README text doc with tables in place of
// Tables(), returning the exit code, the README afterwards and stderr.
func runOn(t *testing.T, doc string, f *fakeTest, args ...string) (int, string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"-readme", path}, args...), &stdout, &stderr, f.run, host, f.has)
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return code, string(after), stderr.String()
}

// kernelOut is a kernel table run with every metric.
func kernelOut() string {
	var b strings.Builder
	b.WriteString("pkg: github.com/agentbox/agentbox/kernel\n")
	out := fullOutput(Tables()[0])
	for _, k := range slices.Sorted(maps.Keys(out.Results)) {
		b.WriteString("Benchmark" + strings.TrimPrefix(k, "kernel.") + "-2 \t 1\t 5 ns/op")
		for u, v := range out.Results[k].Metrics {
			b.WriteString("\t" + strconv.FormatFloat(v, 'g', -1, 64) + " " + u)
		}
		b.WriteString("\n")
	}
	return b.String()
}

const twoTables = "# R\n\nText.\n\n<!-- bench:kernel -->\n| old kernel |\n<!-- /bench -->\n\nMore.\n\n<!-- bench:serve -->\n| old serve |\n<!-- /bench -->\n"

func TestRunWritesMeasuredTablesAndKeepsFailedOnes(t *testing.T) {
	kernel := Tables()[0]
	f := &fakeTest{
		out: map[string]string{kernel.Bench: kernelOut(), "^BenchmarkServe": "pkg: github.com/agentbox/agentbox/server\nBenchmarkServeRoundTrip-2 \t--- FAIL: BenchmarkServeRoundTrip-2\n    bench_test.go:1: boom\nFAIL\n"},
		err: map[string]error{"^BenchmarkServe": errors.New("exit status 1")},
	}
	code, after, stderr := runOn(t, twoTables, f, "-table", "kernel,serve")
	if code != 1 {
		t.Errorf("exit %d, want 1 (the serve table failed)", code)
	}
	if !strings.Contains(after, "| old serve |") {
		t.Errorf("the failed table was not left as it was:\n%s", after)
	}
	if strings.Contains(after, "| old kernel |") || !strings.Contains(after, "| `pass` through the kernel | 1.5 µs | 1.5 µs | 1.5× |") {
		t.Errorf("the kernel table was not rewritten:\n%s", after)
	}
	date := time.Now().UTC().Format("2006-01-02")
	if want := "<sub>`" + kernel.Command(false) + "`, " + date + ", Test CPU, 2 cores, Docker 1.0.</sub>\n<!-- /bench -->"; !strings.Contains(after, want) {
		t.Errorf("no line %q under the table:\n%s", want, after)
	}
	for _, want := range []string{"warning: table serve", "failed: server.ServeRoundTrip", "exit status 1"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.HasPrefix(after, "# R\n\nText.\n\n<!-- bench:kernel -->\n| what |") || !strings.Contains(after, "<!-- /bench -->\n\nMore.\n\n") {
		t.Errorf("the prose around the tables changed:\n%s", after)
	}
	// Run again: the same figures give the same README.
	code2, again, _ := runOn(t, after, f, "-table", "kernel")
	if code2 != 0 || again != after {
		t.Errorf("second run: exit %d, README changed:\n%s", code2, again)
	}
}

func TestRunShortWritesNothing(t *testing.T) {
	kernel := Tables()[0]
	f := &fakeTest{out: map[string]string{kernel.Bench: kernelOut()}}
	code, after, stderr := runOn(t, twoTables, f, "-short", "-table", "kernel")
	if code != 0 || after != twoTables {
		t.Errorf("exit %d (want 0), README changed: %v\n%s", code, after != twoTables, stderr)
	}
	if len(f.calls) != 1 || !strings.Contains(f.calls[0], "-benchtime 1x") || !strings.Contains(f.calls[0], "-short") {
		t.Errorf("calls %q, want one with -benchtime 1x -short", f.calls)
	}
	// A benchmark that reports no figure fails the short pass.
	f = &fakeTest{out: map[string]string{kernel.Bench: "pkg: github.com/agentbox/agentbox/kernel\nBenchmarkRoundTrip-2 \t 1\t 5 ns/op\n"}}
	code, after, stderr = runOn(t, twoTables, f, "-short", "-table", "kernel")
	if code != 1 || after != twoTables || !strings.Contains(stderr, "kernel.RoundTrip floor-med-µs") {
		t.Errorf("exit %d (want 1), README changed: %v, stderr:\n%s", code, after != twoTables, stderr)
	}
	// So does one that was skipped.
	f = &fakeTest{out: map[string]string{kernel.Bench: "pkg: github.com/agentbox/agentbox/kernel\nBenchmarkRoundTrip-2 \t--- SKIP: BenchmarkRoundTrip-2\n    x.go:1: no engine\nBenchmarkOutput1MiB-2 \t--- SKIP: BenchmarkOutput1MiB-2\n    x.go:1: no engine\n"}}
	code, _, stderr = runOn(t, twoTables, f, "-short", "-table", "kernel")
	if code != 1 || !strings.Contains(stderr, "skipped: kernel.RoundTrip: no engine") {
		t.Errorf("exit %d (want 1), stderr:\n%s", code, stderr)
	}
}

func TestRunChecksMarkersFirst(t *testing.T) {
	f := &fakeTest{}
	code, _, stderr := runOn(t, twoTables, f, "-table", "kernel,files")
	if code != 1 || !strings.Contains(stderr, "no <!-- bench:files --> marker") {
		t.Errorf("exit %d (want 1), stderr:\n%s", code, stderr)
	}
	if len(f.calls) != 0 {
		t.Errorf("ran %q before checking the markers", f.calls)
	}
	code, _, stderr = runOn(t, twoTables, f, "-table", "nosuch")
	if code != 2 || !strings.Contains(stderr, `no table "nosuch"`) {
		t.Errorf("exit %d (want 2), stderr:\n%s", code, stderr)
	}
}

func TestFooter(t *testing.T) {
	got := footer(testTable, "2026-11-24", "Test CPU, 2 cores, Docker 1.0", []string{"from nothing"})
	want := "<sub>`go test -p 1 -run '^$' -bench '^BenchmarkRoundTrip$' -benchtime 1x -timeout 30m ./kernel`, 2026-11-24, Test CPU, 2 cores, Docker 1.0." +
		` Row "from nothing" is from an earlier run (it runs with BUILD_IT=1).</sub>`
	if got != want {
		t.Errorf("footer\n%s\nwant\n%s", got, want)
	}
}

// TestParseRealShortPass parses the output of a real make bench-short (every
// table's go test, one after the other, on this project's 2-core VM), in
// which BenchmarkDatasetStage panicked: every table renders from it but the
// one that needs that benchmark, which names what it misses.
func TestParseRealShortPass(t *testing.T) {
	f, err := os.Open("testdata/short.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(out.Results); got != 30 {
		t.Errorf("%d results, want 30 (31 benchmarks, one panicked)", got)
	}
	if r := out.Results["kernel.RoundTrip"]; r.N != 1 || r.Metrics["ns/op"] != 1359511852 {
		t.Errorf("kernel.RoundTrip = %+v", r)
	}
	if v := out.Results["artifacts.Download/256MiB"].Metrics["MB/s"]; v != 2062.70 {
		t.Errorf("artifacts.Download/256MiB MB/s = %v, want 2062.70", v)
	}
	for _, tb := range Tables() {
		if tb.Needs.Env != "" {
			continue // not in that pass: it ran without what the table needs
		}
		md, missing, _ := tb.Render(out, "")
		if tb.Name == "artifacts" {
			want := []string{
				`"stage a Parquet dataset of about 100 MiB from an API source vs copying it in through the engine": session.DatasetStage (no result)`,
				`"stage it into a second session from the cache (no fetch)": session.DatasetStage (no result)`,
			}
			if !slices.Equal(missing, want) {
				t.Errorf("table artifacts: missing %q, want %q", missing, want)
			}
			continue
		}
		if len(missing) > 0 {
			t.Errorf("table %s: missing %q", tb.Name, missing)
		}
		if strings.Contains(md, "NaN") || strings.Contains(md, "Inf") {
			t.Errorf("table %s:\n%s", tb.Name, md)
		}
	}
}

// TestRunSkipsATableWithoutItsRuntime: on an engine without the runtime a
// table compares (runsc), make bench and make bench-short skip that table
// with the reason and succeed; the README keeps its old figures. With the
// runtime, the same table is run (and a missing figure fails as before).
func TestRunSkipsATableWithoutItsRuntime(t *testing.T) {
	const doc = "# R\n\n<!-- bench:runtimes -->\n| old | figures |\n<!-- /bench -->\n"
	for _, short := range []bool{true, false} {
		args := []string{"-table", "runtimes"}
		if short {
			args = append(args, "-short")
		}
		f := &fakeTest{lacks: []string{"runsc"}}
		code, after, stderr := runOn(t, doc, f, args...)
		if code != 0 || after != doc || len(f.calls) != 0 || !strings.Contains(stderr, "the engine has no runsc runtime") {
			t.Errorf("short %v, engine without runsc: exit %d (want 0), README changed %v, calls %q, stderr:\n%s", short, code, after != doc, f.calls, stderr)
		}
	}
	f := &fakeTest{lacks: []string{"some-other-runtime"}}
	code, _, stderr := runOn(t, doc, f, "-short", "-table", "runtimes")
	if code != 1 || len(f.calls) != 1 {
		t.Errorf("engine with runsc, benchmarks reporting nothing: exit %d (want 1), calls %q, stderr:\n%s", code, f.calls, stderr)
	}
}

// TestRunSkipsATableWithoutWhatItNeeds: a table whose benchmarks need an
// environment variable (execd: AGENTBOX_EXECD_SRC, a checkout to build
// from) is skipped with the reason when it is not set, and make bench and
// make bench-short succeed; the README keeps its old figures. Set, the
// table is run.
func TestRunSkipsATableWithoutWhatItNeeds(t *testing.T) {
	const doc = "# R\n\n<!-- bench:execd -->\n| old | figures |\n<!-- /bench -->\n"
	t.Setenv("AGENTBOX_EXECD_SRC", "")
	for _, short := range []bool{true, false} {
		args := []string{"-table", "execd"}
		if short {
			args = append(args, "-short")
		}
		f := &fakeTest{}
		code, after, stderr := runOn(t, doc, f, args...)
		if code != 0 || after != doc || len(f.calls) != 0 || !strings.Contains(stderr, "skipped: AGENTBOX_EXECD_SRC is not set") {
			t.Errorf("short %v, no AGENTBOX_EXECD_SRC: exit %d (want 0), README changed %v, calls %q, stderr:\n%s", short, code, after != doc, f.calls, stderr)
		}
	}
	t.Setenv("AGENTBOX_EXECD_SRC", t.TempDir())
	f := &fakeTest{}
	code, _, stderr := runOn(t, doc, f, "-short", "-table", "execd")
	if code != 1 || len(f.calls) != 1 {
		t.Errorf("AGENTBOX_EXECD_SRC set, benchmarks reporting nothing: exit %d (want 1), calls %q, stderr:\n%s", code, f.calls, stderr)
	}
}
