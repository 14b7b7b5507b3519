package termsafe_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/termsafe"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in, str, line string
	}{
		{"plain", "hello, world", "hello, world", "hello, world"},
		{"newline and tab", "a\tb\nc\n", "a\tb\nc\n", `a\tb\nc\n`},
		{"CRLF kept", "a\r\nb\r\n", "a\r\nb\r\n", `a\r\nb\r\n`},
		{"lone CR", "100%\rdone", `100%\rdone`, `100%\rdone`},
		{"CR at the end", "x\r", `x\r`, `x\r`},
		{"CR CR LF", "x\r\r\n", "x\\r\r\n", `x\r\r\n`},
		{"ESC", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`, `\x1b[31mred\x1b[0m`},
		{"OSC 52", "\x1b]52;c;aGk=\x07", `\x1b]52;c;aGk=\a`, `\x1b]52;c;aGk=\a`},
		{"named C0", "\a\b\f\v\x00\x01\x1f", `\a\b\f\v\x00\x01\x1f`, `\a\b\f\v\x00\x01\x1f`},
		{"DEL", "a\x7fb", `a\x7fb`, `a\x7fb`},
		{"C1 as UTF-8", "a\u009b31mb\u0085", `a\u009b31mb\u0085`, `a\u009b31mb\u0085`},
		{"8-bit CSI, not UTF-8", "a\x9b31m", `a\x9b31m`, `a\x9b31m`},
		{"invalid UTF-8", "\xff\xfe\xe2\x80", `\xff\xfe\xe2\x80`, `\xff\xfe\xe2\x80`},
		{"RLO", "invoice\u202Efdp.exe", `invoice\u202efdp.exe`, `invoice\u202efdp.exe`},
		{"bidi marks and isolates", "\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u061c",
			`\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u061c`,
			`\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u061c`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`, `a\u2028b\u2029c`},
		{"zero width space and BOM", "pay\u200bpal\ufeff", `pay\u200bpal\ufeff`, `pay\u200bpal\ufeff`},
		{"tags", "a\U000E0041", `a\U000e0041`, `a\U000e0041`},
		{"joiners kept", "👨\u200d👩\u200d👧 می\u200cخواهم", "👨\u200d👩\u200d👧 می\u200cخواهم", "👨\u200d👩\u200d👧 می\u200cخواهم"},
		{"ordinary unicode", "résumé 📄 日本 ✓", "résumé 📄 日本 ✓", "résumé 📄 日本 ✓"},
		{"U+FFFD itself", "a\uFFFDb", "a\uFFFDb", "a\uFFFDb"},
		{"backslash left alone", `C:\x1b`, `C:\x1b`, `C:\x1b`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := termsafe.String(tt.in); got != tt.str {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.str)
			}
			if got := termsafe.Line(tt.in); got != tt.line {
				t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.line)
			}
		})
	}
}

func TestWriter(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"CRLF split", []string{"a\r", "\nb"}, "a\r\nb"},
		{"CR then text", []string{"a\r", "b"}, `a\rb`},
		{"CR at the end", []string{"a\r"}, `a\r`},
		{"rune split", []string{"\xe2\x80", "\xaefdp"}, `\u202efdp`},
		{"ordinary rune split", []string{"r\xc3", "\xa9sum\xc3\xa9"}, "résumé"},
		{"incomplete rune at the end", []string{"a\xe2\x80"}, `a\xe2\x80`},
		{"ESC split from its sequence", []string{"\x1b", "[2J"}, `\x1b[2J`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			w := termsafe.NewWriter(&b)
			for _, s := range tt.writes {
				if n, err := w.WriteString(s); n != len(s) || err != nil {
					t.Fatalf("WriteString(%q) = %d, %v", s, n, err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("wrote %q, want %q", b.String(), tt.want)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	in := map[string]string{"k\u202e": "a\x1b\x7f\u009b\u202e\u2066\U000E0041\u2028é📄"}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got := termsafe.JSON(raw)
	want := `{"k\u202e":"a\u001b\u007f\u009b\u202e\u2066\udb40\udc41\u2028é📄"}`
	if string(got) != want {
		t.Errorf("JSON(%s) = %s, want %s", raw, got, want)
	}
	plain := []byte(`{"a":"b"}`)
	if got := termsafe.JSON(plain); &got[0] != &plain[0] {
		t.Error("JSON copied text that needed no change")
	}
}

// unsafeAt returns the offset of the first thing in s a terminal could act
// on, or -1; a carriage return counts only when no newline follows it.
func unsafeAt(s string, oneLine bool) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return i
		case (r == '\n' || r == '\t') && !oneLine:
		case r == '\r' && !oneLine && strings.HasPrefix(s[i+1:], "\n"):
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
			return i
		case r == '\u061c', r == '\u200e', r == '\u200f', r >= '\u202a' && r <= '\u202e',
			r >= '\u2066' && r <= '\u2069', r == '\u2028', r == '\u2029', r == '\ufeff', r == '\u200b':
			return i
		}
		i += n
	}
	return -1
}

var seeds = []string{"", "plain", "a\r\nb", "\r", "\x1b]52;c;aGk=\x07", "\x9b\u009b", "invoice\u202Efdp.exe",
	"\xe2\x80\xae", "\xe2\x80", "a\tb\nc", "👨\u200d👩", "\U000E0041", "\\x1b"}

// FuzzString checks that String and Line never let through a byte or
// character a terminal could act on, that text needing no escape is left
// alone, and that an escape only ever adds.
func FuzzString(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		str, line := termsafe.String(s), termsafe.Line(s)
		if i := unsafeAt(str, false); i >= 0 {
			t.Fatalf("String(%q) = %q: unsafe at byte %d", s, str, i)
		}
		if i := unsafeAt(line, true); i >= 0 {
			t.Fatalf("Line(%q) = %q: unsafe at byte %d", s, line, i)
		}
		if strings.ContainsAny(line, "\n\r\t") {
			t.Fatalf("Line(%q) = %q is not one line", s, line)
		}
		if utf8.ValidString(s) && unsafeAt(s, false) < 0 && !strings.ContainsFunc(s, isFormat) && str != s {
			t.Fatalf("String(%q) = %q changed text without controls", s, str)
		}
		if len(str) < len(s) || len(line) < len(s) {
			t.Fatalf("String(%q) = %q, Line = %q: shorter than the input", s, str, line)
		}
	})
}

// isFormat reports whether r is a format character (Cf), which String
// escapes even where unsafeAt does not look for it.
func isFormat(r rune) bool { return unicode.Is(unicode.Cf, r) }

// FuzzWriter checks that a Writer, however the text is cut into writes,
// writes what String makes of the whole.
func FuzzWriter(f *testing.F) {
	for _, s := range seeds {
		f.Add(s, uint8(1), uint8(3))
	}
	f.Fuzz(func(t *testing.T, s string, cut1, cut2 uint8) {
		a, b := min(int(cut1), len(s)), min(int(cut2), len(s))
		if a > b {
			a, b = b, a
		}
		var out bytes.Buffer
		w := termsafe.NewWriter(&out)
		for _, part := range []string{s[:a], s[a:b], s[b:]} {
			if _, err := w.WriteString(part); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if want := termsafe.String(s); out.String() != want {
			t.Fatalf("writes %q %q %q gave %q, String gives %q", s[:a], s[a:b], s[b:], out.String(), want)
		}
	})
}

// FuzzJSON checks that JSON leaves encoded JSON meaning the same while no
// character a terminal could act on stays raw.
func FuzzJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := json.Marshal(map[string]any{s: []string{s, "x"}})
		if err != nil {
			t.Skip()
		}
		got := termsafe.JSON(raw)
		if i := unsafeAt(string(got), true); i >= 0 {
			t.Fatalf("JSON(%s) = %s: unsafe at byte %d", raw, got, i)
		}
		var a, b any
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &b); err != nil {
			t.Fatalf("JSON(%s) = %s: %v", raw, got, err)
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Fatalf("JSON(%s) = %s decodes differently", raw, got)
		}
	})
}
