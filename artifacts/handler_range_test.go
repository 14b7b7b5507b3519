package artifacts_test

import (
	"net/http"
	"testing"
)

// TestHandlerRangeSuffixZero checks that a zero-length suffix range, which
// selects nothing (RFC 9110, section 14.1.1), is answered 416 with the
// size, and that the ranges around it still behave: other suffixes, a
// one-byte range, a set mixing -0 with a satisfiable range, and an empty
// artifact, which ignores ranges as http.ServeContent does for empty files.
func TestHandlerRangeSuffixZero(t *testing.T) {
	f := newDL(t)
	f.store.add(t, "empty", "empty.txt", "text/plain", "")
	txt, empty := f.url(t, "txt"), f.url(t, "empty")
	etag := `"` + f.store.arts["txt"].SHA256 + `"`
	tests := []struct {
		name   string
		url    string
		hdr    map[string]string
		status int
		body   string // checked unless the status is 416
		check  map[string]string
	}{
		{"bytes=-0", txt, map[string]string{"Range": "bytes=-0"}, 416, "",
			map[string]string{"Content-Range": "bytes */22"}},
		{"bytes=-00, spaced", txt, map[string]string{"Range": "bytes= -00 "}, 416, "",
			map[string]string{"Content-Range": "bytes */22"}},
		{"two zero suffixes", txt, map[string]string{"Range": "bytes=-0,-0"}, 416, "",
			map[string]string{"Content-Range": "bytes */22"}},
		{"-0 and a range past the end", txt, map[string]string{"Range": "bytes=-0,30-40"}, 416, "",
			map[string]string{"Content-Range": "bytes */22"}},
		{"-0 beside a satisfiable range", txt, map[string]string{"Range": "bytes=-0,0-4"}, 206, "hello",
			map[string]string{"Content-Range": "bytes 0-4/22"}},
		{"-0 with a matching If-None-Match", txt, map[string]string{"Range": "bytes=-0", "If-None-Match": etag}, 304, "", nil},
		{"-0 with a stale If-Range", txt, map[string]string{"Range": "bytes=-0", "If-Range": `"old"`}, 200, "hello, artifact world\n", nil},
		{"bytes=-5", txt, map[string]string{"Range": "bytes=-5"}, 206, "orld\n",
			map[string]string{"Content-Range": "bytes 17-21/22", "Content-Length": "5"}},
		{"suffix longer than the artifact", txt, map[string]string{"Range": "bytes=-100"}, 206, "hello, artifact world\n",
			map[string]string{"Content-Range": "bytes 0-21/22"}},
		{"bytes=0-0", txt, map[string]string{"Range": "bytes=0-0"}, 206, "h",
			map[string]string{"Content-Range": "bytes 0-0/22", "Content-Length": "1"}},
		{"empty, bytes=-0", empty, map[string]string{"Range": "bytes=-0"}, 200, "", map[string]string{"Content-Range": ""}},
		{"empty, bytes=-5", empty, map[string]string{"Range": "bytes=-5"}, 200, "", map[string]string{"Content-Range": ""}},
		{"empty, bytes=0-0", empty, map[string]string{"Range": "bytes=0-0"}, 200, "", map[string]string{"Content-Range": ""}},
		{"empty, no range", empty, nil, 200, "", map[string]string{"Content-Length": "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.do(t, http.MethodGet, tt.url, tt.hdr)
			checkSecurityHeaders(t, resp)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; Content-Range %q, body %q",
					resp.StatusCode, tt.status, resp.Header.Get("Content-Range"), body)
			}
			if tt.status != 416 && string(body) != tt.body {
				t.Errorf("body %q, want %q", body, tt.body)
			}
			for k, v := range tt.check {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}
