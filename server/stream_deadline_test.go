package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestStreamOutlastsTheBodyDeadline: an SDK client's JSON body arrives at
// once, then the events of its execution stream for longer than the body
// deadline: the deadline must not cut the stream, whether the body came
// with a length or in chunks, and the client's disconnect must still be
// seen afterwards.
func TestStreamOutlastsTheBodyDeadline(t *testing.T) {
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(sessiontest.NewDriver()))
	if err != nil {
		t.Fatal(err)
	}
	keys := tenant.NewKeys([]string{guardKey})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	mounts := server.APIs(m, cfg, keys, tenant.NewTokens([]byte(strings.Repeat("k", 32))), nil, nil)
	go func() {
		done <- server.Run(ctx, cfg, m, mounts, server.Options{Keys: keys, Listener: ln, BodyTimeout: 200 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	url := "http://" + ln.Addr().String() + "/v1/agentbox/sessions/s/executions"
	body := `{"code":"print('a')\nsleep(1.2)\nprint('b')"}`
	for _, chunked := range []bool{false, true} {
		var rd io.Reader = strings.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // no length: net/http sends chunks
		}
		req, _ := http.NewRequest("POST", url, rd)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+guardKey)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("chunked %v: %v", chunked, err)
		}
		events, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil || !strings.Contains(string(events), "b") || !strings.Contains(string(events), "event: done") && !strings.Contains(string(events), "done") {
			t.Errorf("chunked %v: %d after %v, err %v, events:\n%s", chunked, resp.StatusCode, time.Since(start).Round(time.Millisecond), err, events)
		}
	}
}
