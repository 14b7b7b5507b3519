package execd

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

type upFile struct {
	meta string // the metadata part, raw JSON ("" for none)
	data string
	skip bool // no file part
}

// multipartBody builds an upload as the SDK does: a metadata part, then
// its file part, per file.
func multipartBody(t *testing.T, files []upFile) (io.Reader, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range files {
		if f.meta != "" {
			h := textproto.MIMEHeader{}
			h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
			h.Set("Content-Type", "application/json")
			w, _ := mw.CreatePart(h)
			w.Write([]byte(f.meta))
		}
		if !f.skip {
			w, _ := mw.CreateFormFile("file", "x")
			w.Write([]byte(f.data))
		}
	}
	mw.Close()
	return &b, mw.FormDataContentType()
}

func (e *env) upload(t *testing.T, files []upFile) *http.Response {
	t.Helper()
	body, ct := multipartBody(t, files)
	return e.req("POST", "/files/upload", body, "Content-Type", ct)
}

func (e *env) info(t *testing.T, paths ...string) map[string]fileInfo {
	t.Helper()
	q := ""
	for _, p := range paths {
		q += "&path=" + p
	}
	var out map[string]fileInfo
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/files/info?"+q[1:], nil), http.StatusOK)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFiles goes through every files and directories route.
func TestFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	wantStatus(t, e.upload(t, []upFile{
		{meta: `{"path":"/session/up/a.txt","mode":600,"owner":"root","group":"root"}`, data: "line1\nline2\nline3\n"},
		{meta: `{"path":"/session/up/sub/b.txt"}`, data: "0123456789"},
		{meta: `{"path":"/session/up/c.csv","mode":755}`, data: "x,y\n"},
	}), http.StatusOK)

	got := e.info(t, "/session/up/a.txt", "/session/up/sub/b.txt", "/session/up/c.csv", "/session/up")
	want := map[string]struct {
		typ  string
		mode int
		size int64
	}{
		"/session/up/a.txt":     {"file", 600, 18},
		"/session/up/sub/b.txt": {"file", 644, 10},
		"/session/up/c.csv":     {"file", 755, 4},
		"/session/up":           {"directory", 0, -1},
	}
	for p, w := range want {
		fi := got[p]
		if fi.Path != p || fi.Type != w.typ || (w.mode != 0 && fi.Mode != w.mode) || (w.size >= 0 && fi.Size != w.size) ||
			fi.Owner == "" || fi.Group == "" || fi.ModifiedAt.IsZero() || fi.CreatedAt.IsZero() {
			t.Errorf("info %s = %+v, want %+v", p, fi, w)
		}
	}

	// Download: whole, ranges, lines.
	resp := e.req("GET", "/files/download?path=/session/up/sub/b.txt", nil)
	if body := wantStatus(t, resp, http.StatusOK); body != "0123456789" {
		t.Errorf("download %q", body)
	}
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename=b.txt` {
		t.Errorf("Content-Disposition %q", cd)
	}
	for _, tt := range []struct{ rng, body, cr string }{
		{"bytes=2-4", "234", "bytes 2-4/10"},
		{"bytes=7-", "789", "bytes 7-9/10"},
		{"bytes=-2", "89", "bytes 8-9/10"},
		{"bytes=5-100", "56789", "bytes 5-9/10"},
	} {
		resp := e.req("GET", "/files/download?path=/session/up/sub/b.txt", nil, "Range", tt.rng)
		if body := wantStatus(t, resp, http.StatusPartialContent); body != tt.body || resp.Header.Get("Content-Range") != tt.cr {
			t.Errorf("Range %s: %q, Content-Range %q", tt.rng, body, resp.Header.Get("Content-Range"))
		}
	}
	for _, rng := range []string{"bytes=10-", "bytes=abc", "bytes=0-1,3-4", "bytes=4-2", "pages=1"} {
		resp := e.req("GET", "/files/download?path=/session/up/sub/b.txt", nil, "Range", rng)
		wantError(t, resp, http.StatusRequestedRangeNotSatisfiable, codeRange)
		if cr := resp.Header.Get("Content-Range"); cr != "bytes */10" {
			t.Errorf("Range %s: Content-Range %q", rng, cr)
		}
	}
	for _, tt := range []struct{ q, body string }{
		{"offset=2&limit=1", "line2\n"},
		{"offset=2", "line2\nline3\n"},
		{"limit=2", "line1\nline2\n"},
		{"offset=9", ""},
	} {
		if body := wantStatus(t, e.req("GET", "/files/download?path=/session/up/a.txt&"+tt.q, nil), http.StatusOK); body != tt.body {
			t.Errorf("lines %s: %q, want %q", tt.q, body, tt.body)
		}
	}

	// Search: base names, recursively, files only.
	var found []fileInfo
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/files/search?path=/session/up&pattern=*.txt", nil), http.StatusOK)), &found); err != nil {
		t.Fatal(err)
	}
	if names := paths2(found); names != "/session/up/a.txt,/session/up/sub/b.txt" {
		t.Errorf("search *.txt: %s", names)
	}
	found = nil
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/files/search?path=/session/up", nil), http.StatusOK)), &found); err != nil {
		t.Fatal(err)
	}
	if names := paths2(found); names != "/session/up/a.txt,/session/up/c.csv,/session/up/sub/b.txt" {
		t.Errorf("search all: %s", names)
	}

	// Directories: make (mode), list (depth), move, remove.
	wantStatus(t, e.req("POST", "/directories", strings.NewReader(`{"/session/up/new/deep":{"mode":700},"/session/up/other":{}}`)), http.StatusOK)
	if fi := e.info(t, "/session/up/new/deep")["/session/up/new/deep"]; fi.Type != "directory" || fi.Mode != 700 {
		t.Errorf("made dir %+v", fi)
	}
	var list []fileInfo
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/directories/list?path=/session/up", nil), http.StatusOK)), &list); err != nil {
		t.Fatal(err)
	}
	if names := paths2(list); names != "/session/up/a.txt,/session/up/c.csv,/session/up/new,/session/up/other,/session/up/sub" {
		t.Errorf("list depth 1: %s", names)
	}
	list = nil
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/directories/list?path=/session/up&depth=2", nil), http.StatusOK)), &list); err != nil {
		t.Fatal(err)
	}
	if names := paths2(list); names != "/session/up/a.txt,/session/up/c.csv,/session/up/new,/session/up/new/deep,/session/up/other,/session/up/sub,/session/up/sub/b.txt" {
		t.Errorf("list depth 2: %s", names)
	}
	wantStatus(t, e.req("POST", "/files/mv", strings.NewReader(`[{"src":"/session/up/c.csv","dest":"/session/up/other/c2.csv"}]`)), http.StatusOK)
	if body := wantStatus(t, e.req("GET", "/files/download?path=/session/up/other/c2.csv", nil), http.StatusOK); body != "x,y\n" {
		t.Errorf("moved file %q", body)
	}
	wantError(t, e.req("GET", "/files/info?path=/session/up/c.csv", nil), http.StatusNotFound, codeFileNotFound)
	wantError(t, e.req("DELETE", "/files?path=/session/up/sub", nil), http.StatusBadRequest, codeInvalidFile)
	wantStatus(t, e.req("DELETE", "/files?path=/session/up/a.txt&path=/session/up/other/c2.csv", nil), http.StatusOK)
	wantError(t, e.req("GET", "/files/info?path=/session/up/a.txt", nil), http.StatusNotFound, codeFileNotFound)
	wantStatus(t, e.req("DELETE", "/directories?path=/session/up/sub&path=/session/up/new", nil), http.StatusOK)
	wantError(t, e.req("GET", "/files/info?path=/session/up/sub/b.txt", nil), http.StatusNotFound, codeFileNotFound)
	wantError(t, e.req("GET", "/files/info?path=/session/up/new", nil), http.StatusNotFound, codeFileNotFound)
}

func paths2(fs []fileInfo) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Path)
	}
	return strings.Join(s, ",")
}

// TestFilesBadInput: every refusal in OpenSandbox's shape.
func TestFilesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.MaxBodyBytes = 1024; o.MaxUploadBytes = 64 << 10 })
	wantStatus(t, e.upload(t, []upFile{{meta: `{"path":"/session/f.txt"}`, data: "abc"}}), http.StatusOK)
	tests := []struct {
		name, method, route, body string
		status                    int
		code                      string
	}{
		{"info without path", "GET", "/files/info", "", 400, codeMissingQuery},
		{"info missing file", "GET", "/files/info?path=/session/nope", "", 404, codeFileNotFound},
		{"info dotdot", "GET", "/files/info?path=/session/../etc/passwd", "", 400, codeInvalidFile},
		{"info NUL", "GET", "/files/info?path=/session/a%00b", "", 400, codeInvalidFile},
		{"download folder", "GET", "/files/download?path=/session", "", 400, codeInvalidFile},
		{"download missing", "GET", "/files/download?path=/session/nope", "", 404, codeFileNotFound},
		{"download bad offset", "GET", "/files/download?path=/session/f.txt&offset=0", "", 400, codeInvalidRequest},
		{"download bad limit", "GET", "/files/download?path=/session/f.txt&limit=x", "", 400, codeInvalidRequest},
		{"download no path", "GET", "/files/download", "", 400, codeMissingQuery},
		{"delete missing", "DELETE", "/files?path=/session/nope", "", 404, codeFileNotFound},
		{"delete session root", "DELETE", "/directories?path=/session", "", 400, codeInvalidFile},
		{"search bad pattern", "GET", "/files/search?path=/session&pattern=[", "", 400, codeInvalidRequest},
		{"search a file", "GET", "/files/search?path=/session/f.txt", "", 400, codeInvalidFile},
		{"search missing", "GET", "/files/search?path=/session/nope", "", 404, codeFileNotFound},
		{"list a file", "GET", "/directories/list?path=/session/f.txt", "", 400, codeInvalidFile},
		{"list bad depth", "GET", "/directories/list?path=/session&depth=-1", "", 400, codeInvalidRequest},
		{"mkdir malformed", "POST", "/directories", `{"/session/x":`, 400, codeInvalidRequest},
		{"mkdir bad mode", "POST", "/directories", `{"/session/x":{"mode":999}}`, 400, codeInvalidMetadata},
		{"mkdir over a file", "POST", "/directories", `{"/session/f.txt/x":{}}`, 400, codeInvalidFile},
		{"mkdir huge body", "POST", "/directories", `{"/session/` + strings.Repeat("x", 2048) + `":{}}`, 413, codeTooLarge},
		{"mv malformed", "POST", "/files/mv", `{"src":"a"}`, 400, codeInvalidRequest},
		{"mv missing dest", "POST", "/files/mv", `[{"src":"/session/f.txt"}]`, 400, codeInvalidRequest},
		{"mv missing src", "POST", "/files/mv", `[{"src":"/session/nope","dest":"/session/x"}]`, 404, codeFileNotFound},
		{"upload not multipart", "POST", "/files/upload", `{}`, 400, codeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, e.req(tt.method, tt.route, strings.NewReader(tt.body)), tt.status, tt.code)
		})
	}
	uploads := []struct {
		name   string
		files  []upFile
		status int
		code   string
	}{
		{"file without metadata", []upFile{{data: "x"}}, 400, codeInvalidFile},
		{"metadata without file", []upFile{{meta: `{"path":"/session/g"}`, skip: true}}, 400, codeInvalidMetadata},
		{"metadata not JSON", []upFile{{meta: `{path`, data: "x"}}, 400, codeInvalidMetadata},
		{"metadata without path", []upFile{{meta: `{"mode":644}`, data: "x"}}, 400, codeInvalidMetadata},
		{"bad mode", []upFile{{meta: `{"path":"/session/g","mode":648}`, data: "x"}}, 400, codeInvalidMetadata},
		{"bad path", []upFile{{meta: `{"path":"/session/../g"}`, data: "x"}}, 400, codeInvalidFile},
		{"over the upload cap", []upFile{{meta: `{"path":"/session/big"}`, data: strings.Repeat("x", 128<<10)}}, 413, codeTooLarge},
		{"no files", nil, 400, codeInvalidFile},
	}
	for _, tt := range uploads {
		t.Run("upload "+tt.name, func(t *testing.T) {
			wantError(t, e.upload(t, tt.files), tt.status, tt.code)
		})
	}
	wantError(t, e.req("GET", "/files/info?path=/session/big", nil), http.StatusNotFound, codeFileNotFound)
}

// TestUploadStreams: a file larger than the JSON cap and than any buffer
// goes through whole, with several files in one request.
func TestUploadStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.MaxBodyBytes = 1024 })
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	wantStatus(t, e.upload(t, []upFile{
		{meta: `{"path":"/session/big.bin"}`, data: big},
		{meta: `{"path":"small.txt"}`, data: "s"},
	}), http.StatusOK)
	if body := wantStatus(t, e.req("GET", "/files/download?path=/session/big.bin", nil), http.StatusOK); body != big {
		t.Errorf("big file came back with %d bytes", len(body))
	}
	if body := wantStatus(t, e.req("GET", "/files/download?path=/session/small.txt", nil), http.StatusOK); body != "s" {
		t.Errorf("relative path: %q", body)
	}
}
