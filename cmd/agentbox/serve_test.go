package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestServeUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{[]string{"serve", "--help"}, exitOK, "SERVE_API_KEYS_FILE", ""},
		{[]string{"serve", "-h"}, exitOK, "OPEN-SANDBOX-API-KEY", ""},
		{[]string{"serve", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{[]string{"serve", "--port", "1"}, exitUsage, "", "flag provided but not defined"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr)
		if code != tt.code || !strings.Contains(stdout.String(), tt.out) || !strings.Contains(stderr.String(), tt.err) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.out, tt.err)
		}
	}
	var stdout bytes.Buffer
	run(context.Background(), []string{"help"}, nil, &stdout, &stdout)
	if !strings.Contains(stdout.String(), "serve ") {
		t.Errorf("agentbox help does not list serve")
	}
}

// TestServeRefusesRequestsWithoutAKey runs agentbox serve as an operator
// does, with SERVE_API_KEYS set, and asks each API without a key, with a
// wrong key and with the key: only the last is served.
func TestServeRefusesRequestsWithoutAKey(t *testing.T) {
	sandboxEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const key = "serve-test-key-0123456789"
	t.Setenv("SERVE_ADDR", addr)
	t.Setenv("SERVE_API_KEYS", key)
	t.Setenv("POOL_SIZE", "0") // serve keeps a warm pool; this test needs none

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, strings.NewReader(""), io.Discard, &stderr) }()
	get := func(path, k string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		if k != "" {
			req.Header.Set("OPEN-SANDBOX-API-KEY", k)
			req.Header.Set("Authorization", "Bearer "+k)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for {
		if code, _ := get("/healthz", ""); code == http.StatusOK {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d before serving: %s", code, stderr.String())
		case <-ctx.Done():
			t.Fatalf("serve never answered /healthz: %s", stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// With the key: the list of sandboxes, and a session that does not exist.
	for path, want := range map[string]int{"/v1/sandboxes": http.StatusOK, "/v1/agentbox/sessions/none": http.StatusNotFound} {
		for _, k := range []string{"", "wrong-key-0123456789abc"} {
			if code, body := get(path, k); code != http.StatusUnauthorized {
				t.Errorf("agentbox serve with SERVE_API_KEYS set refuses requests without a key: GET %s with key %q: %d %s, want 401", path, k, code, body)
			}
		}
		if code, body := get(path, key); code != want {
			t.Errorf("GET %s with the key: %d %s, want %d", path, code, body, want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("serve exited %d on shutdown: %s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop within a minute of its context's end")
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
