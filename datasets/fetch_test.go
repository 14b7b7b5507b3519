package datasets_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/datasets"
)

func TestHTTPFetcher(t *testing.T) {
	var gotPath, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAuth = r.URL.EscapedPath(), r.Header.Get("Authorization")
		if r.URL.RawQuery != "v=1" {
			t.Errorf("query %q, want v=1 untouched by the id", r.URL.RawQuery)
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	h := &datasets.HTTPFetcher{URLTemplate: srv.URL + "/datasets/{id}/content?v=1", Token: "s3cret"}
	for _, tt := range []struct{ id, path string }{
		{"sales.parquet", "/datasets/sales.parquet/content"},
		{"../../admin", "/datasets/..%2F..%2Fadmin/content"},
		{"..", "/datasets/%2E%2E/content"},
		{"a b&c=d?e#f", "/datasets/a%20b%26c%3Dd%3Fe%23f/content"},
		{"é~", "/datasets/%C3%A9~/content"},
	} {
		rc, err := h.Fetch(t.Context(), datasets.Request{ID: tt.id})
		if err != nil {
			t.Fatalf("Fetch(%q): %v", tt.id, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != "hello" {
			t.Errorf("Fetch(%q) read %q, %v", tt.id, b, err)
		}
		if gotPath != tt.path {
			t.Errorf("Fetch(%q) requested %s, want %s", tt.id, gotPath, tt.path)
		}
		if gotAuth != "Bearer s3cret" {
			t.Errorf("Authorization %q", gotAuth)
		}
	}
}

func TestHTTPFetcherErrors(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.TrimPrefix(r.URL.Path, "/") {
		case "missing":
			http.Error(w, "no dataset named missing", http.StatusNotFound)
		case "broken":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "database\x00 on\nfire "+strings.Repeat("x", 1000))
		case "forbidden":
			w.WriteHeader(http.StatusForbidden)
		case "slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "slowbody":
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "12345")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "big":
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, strings.Repeat("b", 100))
		case "bigchunked":
			for range 10 {
				io.WriteString(w, strings.Repeat("b", 10))
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer srv.Close()
	h := &datasets.HTTPFetcher{URLTemplate: srv.URL + "/{id}", Timeout: 100 * time.Millisecond, MaxBytes: 50}

	for _, tt := range []struct {
		id     string
		status int
		is     error
		text   string
	}{
		{"missing", 404, datasets.ErrNotFound, `fetch dataset "missing": HTTP 404: not found: no dataset named missing`},
		{"broken", 500, nil, `fetch dataset "broken": HTTP 500: database on fire xxx`},
		{"forbidden", 403, nil, `fetch dataset "forbidden": HTTP 403: forbidden`},
		{"slow", 0, context.DeadlineExceeded, `fetch dataset "slow": timed out after 100ms`},
		{"slowbody", 0, context.DeadlineExceeded, `fetch dataset "slowbody": timed out after 100ms`},
		{"big", 0, datasets.ErrTooLarge, `fetch dataset "big": dataset too large: at least 100 B, limit 50 B`},
		{"bigchunked", 0, datasets.ErrTooLarge, `fetch dataset "bigchunked": dataset too large: at least `},
		{"", 0, datasets.ErrInvalidID, `fetch dataset "": invalid dataset id: empty`},
	} {
		rc, err := h.Fetch(t.Context(), datasets.Request{ID: tt.id})
		if err == nil {
			_, err = io.ReadAll(rc)
			rc.Close()
		}
		fe, ok := errors.AsType[*datasets.FetchError](err)
		if !ok {
			t.Errorf("Fetch(%q): %v, want a *FetchError", tt.id, err)
			continue
		}
		if fe.ID != tt.id || fe.Status != tt.status {
			t.Errorf("Fetch(%q): id %q status %d, want status %d", tt.id, fe.ID, fe.Status, tt.status)
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("Fetch(%q): %v, want it to wrap %v", tt.id, err, tt.is)
		}
		if !strings.HasPrefix(err.Error(), tt.text) {
			t.Errorf("Fetch(%q):\n %s\nwant it to start with\n %s", tt.id, err, tt.text)
		}
		if len(err.Error()) > 300 {
			t.Errorf("Fetch(%q): error of %d bytes", tt.id, len(err.Error()))
		}
	}
}

func TestHTTPFetcherCallerCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	h := &datasets.HTTPFetcher{URLTemplate: srv.URL + "/{id}"}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := h.Fetch(ctx, datasets.Request{ID: "x"})
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timed out after") {
		t.Errorf("Fetch with the caller's deadline: %v; want the caller's error, not the fetcher's timeout", err)
	}
}

func TestBytesFetcher(t *testing.T) {
	f := datasets.BytesFetcher(func(ctx context.Context, req datasets.Request) ([]byte, error) {
		if req.ID == "bad" {
			return nil, errors.New("no such thing")
		}
		return []byte("content of " + req.ID), nil
	})
	rc, err := f.Fetch(t.Context(), datasets.Request{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "content of a" {
		t.Errorf("read %q", b)
	}
	if _, err := f.Fetch(t.Context(), datasets.Request{ID: "bad"}); err == nil {
		t.Error("Fetch(bad) succeeded")
	}
}

// countingServer answers every GET with body, counting requests.
func countingServer(t *testing.T, body string) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}
