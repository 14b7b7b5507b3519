package artifacts_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/artifacts"
)

func TestDetectMIME(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	euro := "€"
	long := strings.Repeat("a", 511) + euro // the 512-byte head cuts the euro sign
	tests := []struct {
		name string
		head []byte
		want string
	}{
		{"data.csv", []byte("a,b\n1,2\n"), "text/csv; charset=utf-8"},
		{"DATA.CSV", []byte("a,b\n"), "text/csv; charset=utf-8"},
		{"latin1.csv", []byte("caf\xe9,1\n"), "text/csv"},
		{"table.tsv", []byte("a\tb\n"), "text/tab-separated-values; charset=utf-8"},
		{"notes.txt", []byte("hello"), "text/plain; charset=utf-8"},
		{"readme.md", []byte("# Title\n"), "text/markdown; charset=utf-8"},
		{"page.html", []byte("<html><script>alert(1)</script>"), "text/html; charset=utf-8"},
		{"result.json", []byte(`{"a": 1}`), "application/json"},
		{"rows.jsonl", []byte("{}\n{}\n"), "application/x-ndjson"},
		{"data.parquet", []byte("PAR1\x15\x04"), "application/vnd.apache.parquet"},
		{"plot.png", png, "image/png"},
		{"plot.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), "image/svg+xml"},
		{"report.pdf", []byte("%PDF-1.7\n"), "application/pdf"},
		{"arr.npz", []byte("PK\x03\x04"), "application/zip"},
		{"archive.tar.gz", []byte("\x1f\x8b\x08"), "application/gzip"},
		// No or unknown extension: the content decides.
		{"plot", png, "image/png"},
		{"out.bin", []byte("%PDF-1.4"), "application/pdf"},
		{"noext", []byte("just text"), "text/plain; charset=utf-8"},
		{"noext", []byte("caf\xe9"), "text/plain"},
		{"noext", []byte("<!DOCTYPE html><p>"), "text/html; charset=utf-8"},
		{"noext", []byte{0, 1, 2, 3, 0xff}, "application/octet-stream"},
		{"noext", nil, "text/plain; charset=utf-8"},
		{"utf16", []byte("\xfe\xff\x00h\x00i"), "text/plain; charset=utf-16be"},
		{"long.txt", []byte(long), "text/plain; charset=utf-8"},
		{"cut.txt", []byte(long[:512]), "text/plain; charset=utf-8"},
		{"short-cut.txt", []byte("ab" + euro[:2]), "text/plain"}, // the whole file: invalid
		{"bad-cut.txt", []byte(strings.Repeat("a", 510) + "\x82\xe2"), "text/plain"},
		{"bad-mid.txt", []byte("a\xe2\x82b"), "text/plain"},
		{"bad-tail.txt", []byte("ab\x82"), "text/plain"},
		{"dir.csv/file", []byte("x"), "text/plain; charset=utf-8"},
		{"weird name .CSV", []byte("x"), "text/csv; charset=utf-8"},
	}
	for _, tt := range tests {
		if got := artifacts.DetectMIME(tt.name, tt.head); got != tt.want {
			t.Errorf("DetectMIME(%q, %q) = %q, want %q", tt.name, tt.head, got, tt.want)
		}
	}
	// Only the first 512 bytes count: invalid UTF-8 after them does not.
	head := append(bytes.Repeat([]byte("a"), 512), 0xff)
	if got := artifacts.DetectMIME("x.txt", head); got != "text/plain; charset=utf-8" {
		t.Errorf("DetectMIME(long head) = %q", got)
	}
}
