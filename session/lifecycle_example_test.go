package session_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// exampleManager is a Manager on the in-memory driver, so these examples
// need no engine; on Docker the calls are the same.
func exampleManager(edit func(*config.Config)) (*session.Manager, func()) {
	dir, err := os.MkdirTemp("", "lifecycle-example")
	if err != nil {
		log.Fatal(err)
	}
	cfg := config.Default()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	if edit != nil {
		edit(&cfg)
	}
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(sessiontest.NewDriver()))
	if err != nil {
		log.Fatal(err)
	}
	return m, func() { m.Close(context.Background()); os.RemoveAll(dir) }
}

// Start creates a session with options of its own, within the maxima the
// operator set; Info describes it.
func ExampleManager_Start() {
	m, done := exampleManager(func(c *config.Config) { c.MaxMemoryMB = 4096 })
	defer done()
	ctx := context.Background()
	in, err := m.Start(ctx, "thread-1",
		session.Env(map[string]string{"DATA_REGION": "eu"}),
		session.Labels(map[string]string{"owner": "alice"}),
		session.TTL(time.Hour),
		session.MemoryMB(2048))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(in.State, in.Image, in.Limits.MemoryMB, in.Limits.TTL, in.Labels["owner"])

	_, err = m.Start(ctx, "thread-2", session.MemoryMB(8192))
	fmt.Println(errors.Is(err, session.ErrAboveMaximum))
	fmt.Println(err)
	// Output:
	// running default 2048 1h0m0s alice
	// true
	// session "thread-2": start: above the configured maximum: memory: 8192 MiB: at most 4096 MiB (SANDBOX_MAX_MEMORY_MB)
}

// CreateWith gives the first Exec on a key the options of the session it
// creates.
func ExampleCreateWith() {
	m, done := exampleManager(nil)
	defer done()
	ctx := context.Background()
	_, err := m.Exec(ctx, "thread-1", "x = 1", session.CreateWith(session.TTL(30*time.Minute)))
	if err != nil {
		log.Fatal(err)
	}
	in, err := m.Info(ctx, "thread-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(in.Limits.TTL, time.Until(in.Expires).Round(time.Minute))
	// Output:
	// 30m0s 30m0s
}

// Pause freezes a session; calls that would reach its kernel are refused
// until Resume, which brings it back as it was.
func ExampleManager_Pause() {
	m, done := exampleManager(nil)
	defer done()
	ctx := context.Background()
	if _, err := m.Exec(ctx, "thread-1", "x = 41"); err != nil {
		log.Fatal(err)
	}
	if err := m.Pause(ctx, "thread-1"); err != nil {
		log.Fatal(err)
	}
	in, _ := m.Info(ctx, "thread-1")
	_, err := m.Exec(ctx, "thread-1", "x + 1")
	fmt.Println(in.State, errors.Is(err, session.ErrPaused))

	if err := m.Resume(ctx, "thread-1"); err != nil {
		log.Fatal(err)
	}
	res, err := m.Exec(ctx, "thread-1", "x + 1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outputs[0].Data["text/plain"])
	// Output:
	// paused true
	// 42
}

// Renew moves a session's expiry, whichever process created it; the sweep
// of any manager sharing the database removes the session after it.
func ExampleManager_Renew() {
	m, done := exampleManager(func(c *config.Config) { c.SessionTTL = time.Minute })
	defer done()
	ctx := context.Background()
	if _, err := m.Start(ctx, "thread-1"); err != nil {
		log.Fatal(err)
	}
	exp, err := m.Renew(ctx, "thread-1", 2*time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(time.Until(exp).Round(time.Hour))
	// Output:
	// 2h0m0s
}
