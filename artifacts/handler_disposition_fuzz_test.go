package artifacts

import (
	"mime"
	"testing"
)

// FuzzContentDisposition checks, for any stored name, that the header is
// printable ASCII that parses, and that the name a client decodes from it
// holds none of the characters hiddenRune names.
func FuzzContentDisposition(f *testing.F) {
	for _, s := range []string{"report.csv", "invoice\u202Efdp.exe", "a\x1b]52;c;x\x07", "a\xffb", "..", "x/\u2066y\u2069", "%22\"\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		cd := contentDisposition(name)
		for i := 0; i < len(cd); i++ {
			if c := cd[i]; c < 0x20 || c >= 0x7f {
				t.Fatalf("contentDisposition(%q) = %q: byte %#x outside printable ASCII", name, cd, c)
			}
		}
		_, params, err := mime.ParseMediaType(cd)
		if err != nil {
			t.Fatalf("contentDisposition(%q) = %q does not parse: %v", name, cd, err)
		}
		for _, r := range params["filename"] {
			if hiddenRune(r) {
				t.Fatalf("contentDisposition(%q) = %q decodes to %q, holding %U", name, cd, params["filename"], r)
			}
		}
	})
}
