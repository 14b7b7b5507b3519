package store

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapText(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		max  int
	}{
		{"ascii", strings.Repeat("a", 50) + strings.Repeat("z", 50), 20},
		{"two-byte runes", strings.Repeat("é", 50), 21},
		{"three-byte runes", strings.Repeat("✓", 40), 20},
		{"four-byte runes", strings.Repeat("🔑", 30), 19},
		{"mixed", "a" + strings.Repeat("日本語", 20) + "z", 33},
		{"invalid utf-8", strings.Repeat("\x80", 40), 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := capText(tt.in, tt.max)
			head, rest, ok := strings.Cut(got, "\n[... ")
			if !ok {
				t.Fatalf("capText = %q, no marker", got)
			}
			var cut int
			var tail string
			if i := strings.Index(rest, " bytes cut ...]\n"); i < 0 {
				t.Fatalf("capText = %q, bad marker", got)
			} else {
				tail = rest[i+len(" bytes cut ...]\n"):]
				var err error
				if cut, err = strconv.Atoi(rest[:i]); err != nil {
					t.Fatal(err)
				}
			}
			if !strings.HasPrefix(tt.in, head) || !strings.HasSuffix(tt.in, tail) {
				t.Errorf("head %q / tail %q not from the input", head, tail)
			}
			if len(head)+cut+len(tail) != len(tt.in) {
				t.Errorf("head %d + cut %d + tail %d != %d", len(head), cut, len(tail), len(tt.in))
			}
			if len(head)+len(tail) > tt.max || len(head)+len(tail) < tt.max-2*utf8.UTFMax {
				t.Errorf("kept %d bytes, want about %d", len(head)+len(tail), tt.max)
			}
			if utf8.ValidString(tt.in) && !utf8.ValidString(got) {
				t.Errorf("capText = %q, not valid UTF-8", got)
			}
		})
	}
	for _, in := range []string{"", "short", strings.Repeat("x", 20)} {
		if got := capText(in, 20); got != in {
			t.Errorf("capText(%q, 20) = %q, want it unchanged", in, got)
		}
	}
}
