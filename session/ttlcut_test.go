package session_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestExecutionCutByTTLSaysExpired: an execution still running when its
// session's time to live ends is cut (the time to live is a hard limit),
// and its error says the session expired at its time to live, and when
// (ErrExpired), not that the container was killed. Before, it said
// "session lost: container ... was stopped" or "was killed (exit code
// 137)", as if something had gone wrong.
func TestExecutionCutByTTLSaysExpired(t *testing.T) {
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	m, err := session.NewManager(context.Background(), cfg,
		session.WithDriver(sessiontest.NewDriver()), session.WithSweepInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })

	cutByTTL(t, m, time.Second)
}

// TestExecutionCutByTTLSaysExpiredEngine is TestExecutionCutByTTLSaysExpired
// on the engine, where the container's end reaches the running call as a
// broken stream, for code and for a command (whose stream said "killed
// (exit code 137)" or "was removed").
func TestExecutionCutByTTLSaysExpiredEngine(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil, session.WithSweepInterval(100*time.Millisecond))
	// Long enough for a start on a loaded machine; both run at once.
	const ttl = 8 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.Start(ctx, "cmd", session.TTL(ttl)); err != nil {
		t.Fatal(err)
	}
	cmdErr := make(chan error, 1)
	go func() {
		_, err := m.Run(ctx, "cmd", session.Command{Line: "sleep 50"})
		cmdErr <- err
	}()
	cutByTTL(t, m, ttl)
	err := <-cmdErr
	if !errors.Is(err, session.ErrExpired) || !strings.Contains(fmt.Sprint(err), "time to live") || strings.Contains(fmt.Sprint(err), "killed") {
		t.Errorf("a command cut by the time to live: %v, want ErrExpired saying so", err)
	}
}

// cutByTTL runs code that outlives a session's time to live of ttl.
func cutByTTL(t *testing.T, m *session.Manager, ttl time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := m.Start(ctx, "k", session.TTL(ttl)); err != nil {
		t.Fatal(err)
	}
	info, err := m.Info(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Exec(ctx, "k", "import time\ntime.sleep(50)")
	if err == nil {
		t.Fatal("an execution outlived its session's time to live")
	}
	if !errors.Is(err, session.ErrExpired) {
		t.Errorf("error %q: want ErrExpired", err)
	}
	at := info.Expires.Local().Format(time.RFC3339)
	if msg := err.Error(); !strings.Contains(msg, "time to live") || !strings.Contains(msg, at) || strings.Contains(msg, "killed") {
		t.Errorf("error %q: want it to say the time to live ended at %s", msg, at)
	}
}
