package artifacts_test

import (
	"fmt"
	"mime"
	"strings"
	"testing"
	"unicode"
)

// hiddenRune reports whether r is a character a download name must not carry:
// it reorders or hides text (bidi controls, format characters), or is a
// control or line/paragraph separator.
func hiddenRune(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// TestContentDispositionStripsBidi serves artifacts whose names try to spoof
// their extension or hide characters, and checks that neither filename= nor
// filename*= gives any of those characters to the browser.
func TestContentDispositionStripsBidi(t *testing.T) {
	f := newDL(t)
	tests := []struct {
		name, stored string
		exact        string // the decoded filename*=
	}{
		{"RLO spoofs the extension", "invoice\u202Efdp.exe", "invoice_fdp.exe"},
		{"LRO", "a\u202Db.txt", "a_b.txt"},
		{"RLE PDF", "\u202Bx\u202C.txt", "_x_.txt"},
		{"LRE", "\u202Ay.txt", "_y.txt"},
		{"LRM RLM", "a\u200Eb\u200F.txt", "a_b_.txt"},
		{"isolates", "\u2066a\u2067b\u2068c\u2069.txt", "_a_b_c_.txt"},
		{"arabic letter mark", "x\u061C.txt", "x_.txt"},
		{"zero width space", "pay\u200Bpal.html", "pay_pal.html"},
		{"byte order mark", "\uFEFFreport.csv", "_report.csv"},
		{"soft hyphen", "ex\u00ADe.txt", "ex_e.txt"},
		{"tag characters", "a\U000E0041\U000E007F.txt", "a__.txt"},
		{"line separator", "a\u2028b.txt", "a_b.txt"},
		{"paragraph separator", "a\u2029b.txt", "a_b.txt"},
		{"C0 controls", "a\x00b\x1b[31mc\x07.txt", "a_b_[31mc_.txt"},
		{"DEL", "a\x7fb.txt", "a_b.txt"},
		{"C1 controls", "a\u0085b\u009bc.txt", "a_b_c.txt"},
		{"OSC 52", "\x1b]52;c;aGk=\x07.txt", "_]52;c;aGk=_.txt"},
		{"CR LF", "a\r\nb.txt", "a__b.txt"},
		{"tab", "a\tb.txt", "a_b.txt"},
		{"ordinary unicode kept", "résumé 📄 日本.pdf", "résumé 📄 日本.pdf"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprint("bidi", i)
			f.store.add(t, id, tt.stored, "application/octet-stream", "x")
			resp, _ := f.do(t, "GET", f.url(t, id), nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			cd := resp.Header.Get("Content-Disposition")
			for _, c := range []byte(cd) {
				if c < 0x20 || c >= 0x7f {
					t.Fatalf("Content-Disposition %q has a byte outside printable ASCII", cd)
				}
			}
			_, params, err := mime.ParseMediaType(cd)
			if err != nil {
				t.Fatalf("Content-Disposition %q does not parse: %v", cd, err)
			}
			exact := params["filename"] // mime puts the decoded filename*= here
			for _, r := range exact {
				if hiddenRune(r) {
					t.Errorf("filename*= decodes to %q, which holds %U", exact, r)
				}
			}
			if exact != tt.exact {
				t.Errorf("filename*= decodes to %q, want %q", exact, tt.exact)
			}
			_, fallback, _ := strings.Cut(cd, `filename="`)
			fallback, _, _ = strings.Cut(fallback, `"`)
			if strings.Count(fallback, "_") < strings.Count(tt.exact, "_") {
				t.Errorf("filename=%q keeps fewer stand-ins than filename*=%q", fallback, tt.exact)
			}
		})
	}
}
