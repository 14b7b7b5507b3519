package store_test

import (
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// TestPauseIdleSession: the sweep's idle pause is decided in one statement
// against a use since; it is recorded as the idle sweep's (PauseReason),
// which a caller's pause or a resume clears; the removal after the paused
// timeout claims only a pause the sweep made and nobody touched since.
func TestPauseIdleSession(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	if err := s.PutSession(ctx, store.Session{Namespace: "n", ID: "s", Key: "k", ContainerID: "c1", Created: at(0), LastUsed: at(time.Second)}); err != nil {
		t.Fatal(err)
	}
	// Used after what the sweep saw: no pause.
	if ok, err := s.PauseIdleSession(ctx, "n", "s", "c1", at(0), at(time.Minute)); ok || err != nil {
		t.Fatalf("pause a session used since: %v, %v", ok, err)
	}
	if ok, _ := s.PauseIdleSession(ctx, "n", "s", "c2", at(time.Second), at(time.Minute)); ok {
		t.Fatal("paused the row of another container")
	}
	paused := time.UnixMilli(at(time.Minute).UnixMilli()).UTC()
	if ok, err := s.PauseIdleSession(ctx, "n", "s", "c1", at(time.Second), paused); !ok || err != nil {
		t.Fatalf("pause an idle session: %v, %v", ok, err)
	}
	if ok, _ := s.PauseIdleSession(ctx, "n", "s", "c1", at(time.Second), at(2*time.Minute)); ok {
		t.Fatal("paused twice")
	}
	l, err := s.SessionLiveness(ctx, "n", "s")
	if err != nil || l.PauseReason != store.PauseIdle || !l.Paused.Equal(paused) {
		t.Fatalf("liveness after the idle pause: %+v, %v", l, err)
	}
	// A claim on another pause than the one seen fails; the seen one wins.
	if ok, _ := s.EvictPausedSession(ctx, "n", "s", "c1", at(time.Hour), at(2*time.Hour), "idle: removed"); ok {
		t.Fatal("removed on a pause it did not see")
	}
	// A caller's pause makes it theirs: never removed for its length.
	if err := s.SetPaused(ctx, "n", "s", paused); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Session(ctx, "n", "s"); got.PauseReason != "" {
		t.Fatalf("a caller's pause reads as %q", got.PauseReason)
	}
	if ok, _ := s.EvictPausedSession(ctx, "n", "s", "c1", paused, at(2*time.Hour), "idle: removed"); ok {
		t.Fatal("removed a session a caller paused")
	}
	// Resumed, then paused idle again: the removal claims it once.
	if err := s.ResumeSession(ctx, "n", "s", at(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	again := time.UnixMilli(at(10 * time.Minute).UnixMilli()).UTC()
	if ok, _ := s.PauseIdleSession(ctx, "n", "s", "c1", at(2*time.Minute), again); !ok {
		t.Fatal("no idle pause after the resume")
	}
	if ok, err := s.EvictPausedSession(ctx, "n", "s", "c1", again, at(2*time.Hour), "idle: removed"); !ok || err != nil {
		t.Fatalf("remove a paused idle session: %v, %v", ok, err)
	}
	if got, _ := s.Session(ctx, "n", "s"); got.Stopped.IsZero() || got.StopReason != "idle: removed" {
		t.Fatalf("after the removal: %+v", got)
	}
}
