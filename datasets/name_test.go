package datasets_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/datasets"
)

// checkSafe fails unless name is one harmless path element under
// /session/data.
func checkSafe(t *testing.T, id, name string) {
	t.Helper()
	if name == "" || name == "." || name == ".." || len(name) > 100 {
		t.Errorf("SafeName(%q) = %q: empty, a dot name, or too long", id, name)
	}
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "-") {
		t.Errorf("SafeName(%q) = %q: starts with %q", id, name, name[:1])
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			t.Errorf("SafeName(%q) = %q: holds byte %q", id, name, c)
			break
		}
	}
	if got := filepath.Join("/session/data", name); filepath.Dir(got) != "/session/data" {
		t.Errorf("SafeName(%q) = %q escapes: %s", id, name, got)
	}
}

func TestSafeName(t *testing.T) {
	for _, tt := range []struct {
		id   string
		want string // exact name, or a prefix ending in "-" followed by a hash
		ext  string // the extension the name must end in
	}{
		// Plain ids stay as they are.
		{id: "sales.parquet", want: "sales.parquet", ext: ".parquet"},
		{id: "2024_Q1-report.csv", want: "2024_Q1-report.csv", ext: ".csv"},
		{id: "notes", want: "notes"},
		{id: "data.v2.json", want: "data.v2.json", ext: ".json"},
		{id: "archive.tar.gz", want: "archive.tar.gz"},
		// Traversal and absolute paths.
		{id: "../x", want: "x-"},
		{id: "../../etc/passwd", want: "etc_passwd-"},
		{id: "/etc/passwd", want: "etc_passwd-"},
		{id: "/abs/data.parquet", want: "abs_data-", ext: ".parquet"},
		{id: "a/../../b.csv", want: "a_.._.._b-", ext: ".csv"},
		{id: `..\..\windows\system32`, want: "windows_system32-"},
		{id: "..", want: "dataset-"},
		{id: ".", want: "dataset-"},
		{id: "...", want: "dataset-"},
		{id: "../", want: "dataset-"},
		{id: "/", want: "dataset-"},
		// Hidden files, options, trailing dots.
		{id: ".bashrc", want: "bashrc-"},
		{id: "-rf", want: "rf-"},
		{id: "--help.csv", want: "help-", ext: ".csv"},
		{id: "name.", want: "name-"},
		// Control characters, spaces, non-ASCII.
		{id: "a\nb\tc.txt", want: "a_b_c-", ext: ".txt"},
		{id: "sales 2024.csv", want: "sales_2024-", ext: ".csv"},
		{id: "données.csv", want: "donn_es-", ext: ".csv"},
		{id: "\x1b[31mred", want: "31mred-"},
		{id: "s3://bucket/key/part-0.parquet", want: "s3_bucket_key_part-0-", ext: ".parquet"},
		{id: "https://x.io/d?id=1&f=2#frag", want: "https_x.io_d_id_1_f_2_frag-"},
		// Known extensions are kept, lowercased.
		{id: "Sales.PARQUET", want: "Sales-", ext: ".parquet"},
		{id: "t.Feather", want: "t-", ext: ".feather"},
		{id: "x.arrow", want: "x.arrow", ext: ".arrow"},
		{id: ".parquet", want: "dataset-", ext: ".parquet"},
		{id: "../.csv", want: "dataset-", ext: ".csv"},
		// A plain id that looks like a changed one is hashed too.
		{id: "x-0123456789.csv", want: "x-0123456789-", ext: ".csv"},
		// Long ids keep a readable start, the hash and the extension.
		{id: strings.Repeat("a", 300) + ".parquet", want: strings.Repeat("a", 80) + "-", ext: ".parquet"},
		{id: strings.Repeat("../", 300), want: "dataset-"},
		{id: strings.Repeat("é", 512), want: "dataset-"},
	} {
		got, err := datasets.SafeName(tt.id)
		if err != nil {
			t.Errorf("SafeName(%q): %v", tt.id, err)
			continue
		}
		checkSafe(t, tt.id, got)
		if !strings.HasSuffix(tt.want, "-") {
			if got != tt.want {
				t.Errorf("SafeName(%q) = %q, want %q", tt.id, got, tt.want)
			}
			continue
		}
		hash := strings.TrimSuffix(strings.TrimPrefix(got, tt.want), tt.ext)
		if !strings.HasPrefix(got, tt.want) || !strings.HasSuffix(got, tt.ext) || len(hash) != 10 {
			t.Errorf("SafeName(%q) = %q, want %q + 10 hex digits + %q", tt.id, got, tt.want, tt.ext)
		}
	}
}

func TestSafeNameInvalid(t *testing.T) {
	for _, id := range []string{"", "a\x00b", "\x00", "x.csv\x00.parquet", strings.Repeat("a", datasets.MaxIDLength+1)} {
		if got, err := datasets.SafeName(id); !errors.Is(err, datasets.ErrInvalidID) {
			t.Errorf("SafeName(%.20q) = %q, %v; want ErrInvalidID", id, got, err)
		}
	}
	if _, err := datasets.SafeName(strings.Repeat("a", datasets.MaxIDLength)); err != nil {
		t.Errorf("SafeName of %d bytes: %v", datasets.MaxIDLength, err)
	}
}

// TestSafeNameDistinct checks that ids that slug alike get distinct names.
func TestSafeNameDistinct(t *testing.T) {
	ids := []string{"a/b.csv", "a_b.csv", "a b.csv", "a\\b.csv", "a//b.csv", "A_B.CSV", "a_b.CSV",
		"..", ".", "/", "../", "x", "-x", ".x", "x.", strings.Repeat("y", 200), strings.Repeat("y", 201)}
	seen := map[string]string{}
	for _, id := range ids {
		name, err := datasets.SafeName(id)
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("SafeName(%q) = SafeName(%q) = %q", id, other, name)
		}
		seen[name] = id
		if again, _ := datasets.SafeName(id); again != name {
			t.Errorf("SafeName(%q) not stable: %q then %q", id, name, again)
		}
	}
}

func FuzzSafeName(f *testing.F) {
	for _, s := range []string{"sales.parquet", "../x", "/etc/passwd", "..", "a\x00", "Ünïcode.CSV", "-x-0123456789"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		name, err := datasets.SafeName(id)
		if err != nil {
			if !errors.Is(err, datasets.ErrInvalidID) {
				t.Fatalf("SafeName(%q): %v, not ErrInvalidID", id, err)
			}
			return
		}
		checkSafe(t, id, name)
	})
}
