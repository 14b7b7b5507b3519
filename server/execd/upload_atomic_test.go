package execd

import (
	"net/http"
	"strings"
	"testing"
)

// TestUploadAllOrNothing: an upload the server refuses writes nothing: a
// second file over the cap (413), a second file with a bad path or
// malformed metadata (400) leave the first one unwritten, and a file that
// was there before keeps its content. Before, the 413 came after the
// first file was in place.
func TestUploadAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.MaxUploadBytes = 64 << 10 })
	wantStatus(t, e.upload(t, []upFile{{meta: `{"path":"/session/kept.txt"}`, data: "before"}}), http.StatusOK)
	for _, tt := range []struct {
		name   string
		second upFile
		status int
		code   string
	}{
		{"over the cap", upFile{meta: `{"path":"/session/big.bin"}`, data: strings.Repeat("x", 128<<10)}, 413, codeTooLarge},
		{"bad path", upFile{meta: `{"path":"/session/../etc/x"}`, data: "x"}, 400, codeInvalidFile},
		{"bad metadata", upFile{meta: `{path`, data: "x"}, 400, codeInvalidMetadata},
		// Found only in the sandbox, by the helper, once the call was sent
		// whole with its commit: a file is in the way of a folder.
		{"refused in the sandbox", upFile{meta: `{"path":"/session/kept.txt/under"}`, data: "x"}, 400, codeInvalidFile},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, e.upload(t, []upFile{
				{meta: `{"path":"/session/first.txt"}`, data: "first"},
				{meta: `{"path":"/session/kept.txt"}`, data: "replaced"},
				tt.second,
			}), tt.status, tt.code)
			for _, p := range []string{"/session/first.txt", "/session/big.bin"} {
				wantError(t, e.req("GET", "/files/info?path="+p, nil), http.StatusNotFound, codeFileNotFound)
			}
			if got := wantStatus(t, e.req("GET", "/files/download?path=/session/kept.txt", nil), http.StatusOK); got != "before" {
				t.Errorf("kept.txt = %q after a refused upload, want %q", got, "before")
			}
			// No staged leftovers either.
			list := wantStatus(t, e.req("GET", "/directories/list?path=/session", nil), http.StatusOK)
			if strings.Contains(list, ".part") {
				t.Errorf("staged files left behind: %s", list)
			}
		})
	}
	// A good upload of several files still writes them all.
	wantStatus(t, e.upload(t, []upFile{
		{meta: `{"path":"/session/a/one.txt"}`, data: "1"},
		{meta: `{"path":"/session/kept.txt"}`, data: "after"},
	}), http.StatusOK)
	if got := wantStatus(t, e.req("GET", "/files/download?path=/session/kept.txt", nil), http.StatusOK); got != "after" {
		t.Errorf("kept.txt = %q, want %q", got, "after")
	}
	if got := wantStatus(t, e.req("GET", "/files/download?path=/session/a/one.txt", nil), http.StatusOK); got != "1" {
		t.Errorf("a/one.txt = %q, want %q", got, "1")
	}
}
