package artifacts_test

import (
	"fmt"
	"mime"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/artifacts"
)

func TestHandlerContentDisposition(t *testing.T) {
	f := newDL(t)
	long := strings.Repeat("é", 126) + "abc" // 255 bytes
	tests := []struct {
		name     string
		stored   string // Artifact.Name
		exact    string // the file name a client should use
		fallback string // the filename= parameter
	}{
		{"plain", "report.csv", "report.csv", "report.csv"},
		{"directories dropped", "plots/2025/fig 1.png", "fig 1.png", "fig 1.png"},
		{"quotes", `say "hi".txt`, `say "hi".txt`, "say _hi_.txt"},
		{"backslash", `a\b.txt`, `a\b.txt`, "a_b.txt"},
		{"newline", "a\nSet-Cookie: x=1\r\n.txt", "a_Set-Cookie: x=1__.txt", "a_Set-Cookie: x=1__.txt"},
		{"percent", "100%.txt", "100%.txt", "100_.txt"},
		{"unicode", "résumé 📄.pdf", "résumé 📄.pdf", "r_sum_ _.pdf"},
		{"255 bytes", long, long, strings.Repeat("_", 126) + "abc"},
		{"semicolon", "a; filename=evil.exe", "a; filename=evil.exe", "a; filename=evil.exe"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb", "a_b"},
		{"dot dot", "..", "artifact", "artifact"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprint("cd", i)
			f.store.add(t, id, tt.stored, "application/octet-stream", "x")
			resp, _ := f.do(t, "GET", f.url(t, id), nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			cd := resp.Header.Get("Content-Disposition")
			for _, c := range cd {
				if c < 0x20 || c >= 0x7f {
					t.Fatalf("Content-Disposition %q has a byte outside printable ASCII", cd)
				}
			}
			if want := `attachment; filename="` + tt.fallback + `"; `; !strings.HasPrefix(cd, want) {
				t.Errorf("Content-Disposition %q, want the prefix %q", cd, want)
			}
			disp, params, err := mime.ParseMediaType(cd)
			if err != nil {
				t.Fatalf("Content-Disposition %q does not parse: %v", cd, err)
			}
			if disp != "attachment" || params["filename"] != tt.exact {
				t.Errorf("parsed as %q, filename %q; want attachment, %q", disp, params["filename"], tt.exact)
			}
		})
	}
}

func TestHandlerBadMIME(t *testing.T) {
	f := newDL(t)
	f.store.add(t, "odd", "x.bin", "not a type;;", "x")
	f.store.add(t, "none", "y.bin", "", "y")
	for _, id := range []string{"odd", "none"} {
		resp, _ := f.do(t, "GET", f.url(t, id), nil)
		if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Errorf("%s: Content-Type %q, want application/octet-stream", id, ct)
		}
	}
}

func TestURL(t *testing.T) {
	tests := []struct{ base, id, token, want string }{
		{"http://localhost:8000", "abc", "t.o.k", "http://localhost:8000/artifacts/abc?token=t.o.k"},
		{"https://h.example/dl/", "abc", "x", "https://h.example/dl/artifacts/abc?token=x"},
		{"http://h", "a/b c", "a+b=", "http://h/artifacts/a%2Fb%20c?token=a%2Bb%3D"},
	}
	for _, tt := range tests {
		if got := artifacts.URL(tt.base, tt.id, tt.token); got != tt.want {
			t.Errorf("URL(%q, %q, %q) = %q, want %q", tt.base, tt.id, tt.token, got, tt.want)
		}
	}
}
