package sessiontest_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// syncBuffer is a log sink safe for the Manager's goroutines.
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

// TestMemoryFittedToHost: without SANDBOX_MAX_MEMORY_MB, a session asking
// for OpenSandbox's default 2 GiB gets it on a host that can back it, and
// on a small host is given what the host can back (never less than
// SANDBOX_MEMORY_MB), logged; an explicit maximum gives requests in full
// and refuses above it (issue 24 row 1).
func TestMemoryFittedToHost(t *testing.T) {
	const gib = 1 << 30
	// With the defaults a session's files in memory take 1344 MiB
	// (/session 1024, /tmp 256, /dev/shm 64).
	for _, tt := range []struct {
		name      string
		hostBytes int64
		maxMB     int
		askMB     int
		want      int
		err       error
		logs      []string
	}{
		{"host unknown", 0, 0, 2048, 2048, nil, nil},
		{"large host", 64 * gib, 0, 2048, 2048, nil, nil},
		{"above the default maximum", 64 * gib, 0, 4096, 0, session.ErrAboveMaximum, nil},
		{"small host", 3 * gib, 0, 2048, 3072 - 1344, nil, []string{"lowered", "asked_mb=2048", "given_mb=1728", "session_key=k"}},
		{"tiny host", 1 * gib, 0, 2048, 1024, nil, []string{"lower SANDBOX_MEMORY_MB or TMPFS_SIZE_MB", "given_mb=1024"}},
		{"explicit maximum on a small host", 3 * gib, 4096, 2048, 2048, nil, nil},
		{"above an explicit maximum", 64 * gib, 1024, 2048, 0, session.ErrAboveMaximum, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := sessiontest.NewDriver()
			d.SetEngineMemory(tt.hostBytes)
			var logs syncBuffer
			m := startManager(t, d, testConfig(t, func(c *config.Config) { c.MaxMemoryMB = tt.maxMB }),
				session.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
			info, err := m.Start(context.Background(), "k", session.MemoryMB(tt.askMB))
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), "SANDBOX_MAX_MEMORY_MB") {
					t.Fatalf("start: %v, want %v naming SANDBOX_MAX_MEMORY_MB", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if info.Limits == nil || info.Limits.MemoryMB != tt.want {
				t.Fatalf("limits %+v, want %d MiB", info.Limits, tt.want)
			}
			for _, w := range tt.logs {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("log does not say %q:\n%s", w, logs.String())
				}
			}
			if len(tt.logs) == 0 && strings.Contains(logs.String(), "lowered") {
				t.Errorf("memory lowered where it should not be:\n%s", logs.String())
			}
		})
	}
}
