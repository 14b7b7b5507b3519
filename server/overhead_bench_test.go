package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// BenchmarkServeOverhead: what serving a `pass` through execd's /code
// costs over calling the Manager, on the in-memory driver (no engine), so
// the figure is the server's own CPU: b.N calls spread over 10 sandboxes
// at once, served (sub-benchmark "served") and direct ("library").
func BenchmarkServeOverhead(b *testing.B) {
	cfg := config.Default()
	dir := b.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(sessiontest.NewDriver()))
	if err != nil {
		b.Fatal(err)
	}
	s := serveOver(b, cfg, m)
	tn := s.tenant
	ctx := context.Background()
	type box struct {
		key, execd string
		hdr        map[string]string
	}
	boxes := make([]box, 10)
	for i := range boxes {
		id, execd, hdr := s.sandbox(b)
		boxes[i] = box{tn.SessionKey(id), execd, hdr}
	}
	code, _ := json.Marshal(map[string]any{"code": "x = 1", "context": map[string]string{"language": "python"}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(boxes)}}
	spread := func(b *testing.B, one func(box)) {
		var wg sync.WaitGroup
		work := make(chan struct{})
		for _, x := range boxes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range work {
					one(x)
				}
			}()
		}
		for i := 0; i < b.N; i++ {
			work <- struct{}{}
		}
		close(work)
		wg.Wait()
	}
	b.Run("library", func(b *testing.B) {
		spread(b, func(x box) {
			if _, err := m.Exec(ctx, x.key, "x = 1"); err != nil {
				b.Error(err)
			}
		})
	})
	b.Run("served", func(b *testing.B) {
		spread(b, func(x box) { call(b, client, x.execd+"/code", string(code), x.hdr) })
	})
}
