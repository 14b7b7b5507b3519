package datasets_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/datasets"
)

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantOrderColumns is the schema of order as Describe reports it.
var wantOrderColumns = func() []datasets.Column {
	addr := func(path string) []datasets.Column {
		return []datasets.Column{
			{Name: "city", Path: path + ".city", Type: "string"},
			{Name: "zip", Path: path + ".zip", Type: "string", Nullable: true},
		}
	}
	const st = "struct<city string, zip string (nullable)>"
	return []datasets.Column{
		{Name: "id", Path: "id", Type: "int64"},
		{Name: "name", Path: "name", Type: "string", Nullable: true},
		{Name: "tags", Path: "tags", Type: "list<string>", Repeated: true},
		{Name: "scores", Path: "scores", Type: "list<double>", Repeated: true},
		{Name: "address", Path: "address", Type: st, Children: addr("address")},
		{Name: "billing", Path: "billing", Type: st, Nullable: true, Children: addr("billing")},
		{Name: "items", Path: "items", Type: "list<" + st + ">", Repeated: true, Children: addr("items")},
		{Name: "attrs", Path: "attrs", Type: "map<string, int32>"},
		{Name: "when", Path: "when", Type: "timestamp[ms, UTC]"},
	}
}()

// normalize makes empty Children nil, for comparison.
func normalize(cols []datasets.Column) []datasets.Column {
	for i := range cols {
		if len(cols[i].Children) == 0 {
			cols[i].Children = nil
		}
		normalize(cols[i].Children)
	}
	return cols
}

func TestDescribeDir(t *testing.T) {
	dir := t.TempDir()
	writeParquetDir(t, dir, 100, 25, 10)
	write(t, filepath.Join(dir, "sub", "people.csv"), "\xef\xbb\xbfid,\"last, first\",email\r\n1,\"Doe, J\",j@x\n")
	write(t, filepath.Join(dir, "notes.json"), `{"a": 1}`)
	write(t, filepath.Join(dir, "blob.bin"), "0123456789")
	write(t, filepath.Join(dir, "fake.parquet"), "id,name\n1,x\n")
	write(t, filepath.Join(dir, ".hidden.parquet"), "x")
	write(t, filepath.Join(dir, ".ipynb_checkpoints", "a.csv"), "x")
	// Links planted by sandboxed code must not lead DescribeDir outside dir.
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret.csv"), "root:x:0:0\n")
	for name, target := range map[string]string{
		"link.csv": filepath.Join(outside, "secret.csv"), "linkdir": outside, "escape.csv": "../../../../etc/passwd",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.csv"), 0o644); err != nil {
		t.Logf("no FIFO: %v", err)
	}

	start := time.Now()
	infos, err := datasets.DescribeDir(dir)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("DescribeDir of %d files (100 Parquet) took %v", len(infos), elapsed)

	var names []string
	byName := map[string]datasets.Info{}
	for _, in := range infos {
		names = append(names, in.Name)
		byName[in.Name] = in
	}
	if len(infos) != 104 || names[0] != "blob.bin" || names[1] != "fake.parquet" || names[2] != "notes.json" ||
		names[3] != "part-000.parquet" || names[103] != "sub/people.csv" {
		t.Fatalf("DescribeDir listed %d files: %v", len(infos), names)
	}
	for i := range 100 {
		name := fmt.Sprintf("part-%03d.parquet", i)
		in := byName[name]
		if in.Format != datasets.FormatParquet || in.Problem != "" || in.Parquet == nil ||
			in.Parquet.Rows != 25 || in.Parquet.RowGroups != 3 || in.Path != filepath.Join(dir, name) {
			t.Fatalf("%s: %+v", name, in)
		}
		if got := normalize(in.Parquet.Columns); !reflect.DeepEqual(got, wantOrderColumns) {
			t.Fatalf("%s columns:\n got %+v\nwant %+v", name, got, wantOrderColumns)
		}
	}
	if got := byName["sub/people.csv"]; got.Format != datasets.FormatCSV ||
		!reflect.DeepEqual(got.CSVHeader, []string{"id", "last, first", "email"}) {
		t.Errorf("people.csv: %+v", got)
	}
	if got := byName["notes.json"]; got.Format != datasets.FormatJSON || got.Size != 8 {
		t.Errorf("notes.json: %+v", got)
	}
	if got := byName["blob.bin"]; got.Format != datasets.FormatOther || got.Size != 10 {
		t.Errorf("blob.bin: %+v", got)
	}
	if got := byName["fake.parquet"]; !strings.Contains(got.Problem, "not the format it claims") || got.Parquet != nil {
		t.Errorf("fake.parquet: %+v", got)
	}
}

func TestDescribeDirErrors(t *testing.T) {
	if _, err := datasets.DescribeDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("DescribeDir of a missing folder succeeded")
	}
	infos, err := datasets.DescribeDir(t.TempDir())
	if err != nil || infos == nil || len(infos) != 0 {
		t.Errorf("DescribeDir of an empty folder = %#v, %v", infos, err)
	}
}

func TestDescribeCSV(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		content string
		want    []string
	}{
		{"a,b,c\n1,2,3\n", []string{"a", "b", "c"}},
		{"a,b\r\n", []string{"a", "b"}},
		{"\xef\xbb\xbfonly", []string{"only"}},
		{`"quoted ""x""",plain` + "\n", []string{`quoted "x"`, "plain"}},
		{`sloppy "quote,b` + "\n", []string{`sloppy "quote`, "b"}},
		{"", nil},
		{strings.Repeat("w,", 40000), nil}, // first line cut at 64 KiB: fields still come back
	} {
		p := filepath.Join(dir, "x.csv")
		write(t, p, tt.content)
		in, err := datasets.Describe(p)
		if err != nil {
			t.Errorf("Describe(%.20q): %v", tt.content, err)
			continue
		}
		if tt.want == nil && len(tt.content) > 0 {
			if len(in.CSVHeader) < 1000 {
				t.Errorf("long header: %d fields", len(in.CSVHeader))
			}
			continue
		}
		if !reflect.DeepEqual(in.CSVHeader, tt.want) {
			t.Errorf("Describe(%.20q).CSVHeader = %q, want %q", tt.content, in.CSVHeader, tt.want)
		}
	}
}

// TestDescribeHostileParquet feeds Describe broken and mutated footers: it
// must fail with ErrFormat, never panic or allocate what a footer claims.
func TestDescribeHostileParquet(t *testing.T) {
	dir := t.TempDir()
	good := parquetBytes(t, 30, 10)
	huge := append([]byte("PAR1"), make([]byte, 8)...)
	binary.LittleEndian.PutUint32(huge[4:], 0xfffffff0)
	huge = append(huge, "PAR1"...)
	for name, content := range map[string][]byte{
		"short":     []byte("PAR1"),
		"magicless": good[:len(good)-4],
		"huge":      huge,
		"garbage":   append(append([]byte("PAR1"), []byte("\x08\x00\x00\x00garbage!")...), "\x0c\x00\x00\x00PAR1"...),
		"encrypted": append(good[:len(good)-4:len(good)-4], "PARE"...),
	} {
		p := filepath.Join(dir, name+".parquet")
		write(t, p, string(content))
		in, err := datasets.Describe(p)
		if err == nil || in.Name != name+".parquet" || in.Size != int64(len(content)) {
			t.Errorf("%s: %+v, %v; want an error and the Info known", name, in, err)
		}
		if name != "encrypted" && !errors.Is(err, datasets.ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
	}
	// Random damage to the footer: any outcome but a panic or a hang.
	rng := rand.New(rand.NewPCG(1, 2))
	footer := int(binary.LittleEndian.Uint32(good[len(good)-8:]))
	p := filepath.Join(dir, "mutant.parquet")
	for range 300 {
		b := append([]byte(nil), good...)
		for range 1 + rng.IntN(4) {
			b[len(b)-8-1-rng.IntN(footer)] = byte(rng.Uint32())
		}
		write(t, p, string(b))
		datasets.Describe(p)
	}
}

// footerBomb returns a Parquet file whose footer is one row group of
// chunks empty column chunks, one byte each on the wire.
func footerBomb(chunks int) []byte {
	f := []byte{0x15, 0x02}                          // version: 1
	f = append(f, 0x19, 0x1c, 0x48, 0x01, 'r', 0x00) // schema: [{name: "r"}]
	f = append(f, 0x16, 0x02)                        // num_rows: 1
	f = append(f, 0x19, 0x1c, 0x19, 0xfc)            // row_groups: [{columns: [...
	f = binary.AppendUvarint(f, uint64(chunks))
	f = append(f, make([]byte, chunks)...) // {}, {}, ...
	f = append(f, 0x00, 0x00)              // ...]}] and the end
	b := append([]byte("PAR1"), f...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
	return append(b, "PAR1"...)
}

// TestDescribeFooterBombs checks that a small file cannot make Describe
// allocate much: parquet-go allocates lists at the length they claim.
func TestDescribeFooterBombs(t *testing.T) {
	claim := []byte{0x15, 0x02, 0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07} // 2^31-1 schema elements
	huge := append([]byte("PAR1"), claim...)
	huge = binary.LittleEndian.AppendUint32(huge, uint32(len(claim)))
	huge = append(huge, "PAR1"...)
	dir := t.TempDir()
	for _, tt := range []struct {
		name     string
		content  []byte
		refused  string
		maxAlloc uint64
	}{
		{"claim", huge, "list of 2147483647 elements in 0 bytes", 1 << 20},
		{"over budget", footerBomb(140_000), "would take over 128.0 MiB", 4 << 20},
		{"under budget", footerBomb(120_000), "", 160 << 20},
	} {
		p := filepath.Join(dir, tt.name+".parquet")
		write(t, p, string(tt.content))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := datasets.Describe(p)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, datasets.ErrFormat) || !strings.Contains(err.Error(), tt.refused) {
			t.Errorf("%s: %v; want ErrFormat saying %q", tt.name, err, tt.refused)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > tt.maxAlloc {
			t.Errorf("%s: a %d-byte file made Describe allocate %d MiB", tt.name, len(tt.content), n>>20)
		}
	}
}

func FuzzDescribeParquet(f *testing.F) {
	f.Add(parquetBytes(f, 3, 2))
	f.Add(footerBomb(3))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "f.parquet")
		write(t, p, string(b))
		datasets.Describe(p) // any outcome but a panic, a hang or a huge allocation
	})
}

func TestSummary(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "orders.parquet")
	write(t, p, string(parquetBytes(t, 1200, 500)))
	in, err := datasets.Describe(p)
	if err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("orders.parquet: %.1f KiB, 1200 rows, 3 row groups; ", float64(in.Size)/1024)
	if got := in.Summary(); got != head+orderSummary {
		t.Errorf("Summary:\n got %s\nwant %s", got, head+orderSummary)
	}
	many := make([]string, 150)
	for i := range many {
		many[i] = fmt.Sprintf("c%d", i)
	}
	many[0], many[1], many[2] = "a, b", "", "\x1b[2J"
	for _, tt := range []struct {
		in   datasets.Info
		want string
	}{
		{datasets.Info{Name: "a.csv", Size: 2 << 20, Format: datasets.FormatCSV, CSVHeader: []string{"id", "full name"}},
			"a.csv: 2.0 MiB, csv; columns: id, full name"},
		{datasets.Info{Name: "a.csv", Size: 10, Format: datasets.FormatCSV, CSVHeader: many},
			`a.csv: 10 B, csv; columns: "a, b", "", "\x1b[2J", c3, `},
		{datasets.Info{Name: "n.json", Size: 1536, Format: datasets.FormatJSON}, "n.json: 1.5 KiB, json"},
		{datasets.Info{Name: "x.bin", Size: 1, Format: datasets.FormatOther}, "x.bin: 1 B"},
		{datasets.Info{Name: "sub dir/x y.bin", Size: 1, Format: datasets.FormatOther}, "sub dir/x y.bin: 1 B"},
		{datasets.Info{Name: "a.bin\nb.csv: 1 B, csv; columns: fake", Size: 1, Format: datasets.FormatOther},
			`"a.bin\nb.csv: 1 B, csv; columns: fake": 1 B`},
		{datasets.Info{Name: "b.parquet", Size: 3, Format: datasets.FormatParquet, Problem: "not the format it claims"},
			"b.parquet: 3 B, parquet; unreadable: not the format it claims"},
		{datasets.Info{Name: "one.parquet", Size: 100, Format: datasets.FormatParquet,
			Parquet: &datasets.ParquetInfo{Rows: 1, RowGroups: 1, Columns: []datasets.Column{{Name: "weird name,", Type: "int32"}}}},
			`one.parquet: 100 B, 1 row, 1 row group; columns: "weird name," int32`},
	} {
		if got := tt.in.Summary(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("Summary = %q, want it to start with %q", got, tt.want)
		}
	}
	if got := (datasets.Info{Name: "a.csv", Format: datasets.FormatCSV, CSVHeader: many}).Summary(); !strings.HasSuffix(got, "c99, ... and 50 more") {
		t.Errorf("Summary of 150 columns ends %q", got[len(got)-30:])
	}
}

// BenchmarkDescribeDir lists 100 Parquet files of the order schema (9
// columns, 13 leaves, nested ones included): of 1000 rows in one row group,
// as most files are, and of 1000 rows in 100 row groups, whose footers are
// 100 times larger.
func BenchmarkDescribeDir(b *testing.B) {
	for _, perGroup := range []int{1000, 10} {
		b.Run(fmt.Sprintf("rowgroups=%d", 1000/perGroup), func(b *testing.B) {
			dir := b.TempDir()
			writeParquetDir(b, dir, 100, 1000, perGroup)
			for b.Loop() {
				infos, err := datasets.DescribeDir(dir)
				if err != nil || len(infos) != 100 {
					b.Fatalf("%d files, %v", len(infos), err)
				}
			}
		})
	}
}
