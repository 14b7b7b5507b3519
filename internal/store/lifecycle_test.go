package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

func TestRenewAndExpire(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	exp := time.UnixMilli(at(time.Minute).UnixMilli()).UTC()
	sess := store.Session{Namespace: "n", ID: "s", Key: "k", ContainerID: "c1", Created: at(0), LastUsed: at(0), Expires: exp}
	if err := s.PutSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Session(ctx, "n", "s"); !got.Expires.Equal(exp) || !got.Paused.IsZero() {
		t.Fatalf("put: expires %v paused %v, want %v and none", got.Expires, got.Paused, exp)
	}
	// Not expired yet: the sweep's claim fails, a renewal succeeds.
	if ok, err := s.ExpireSession(ctx, "n", "s", "c1", at(30*time.Second), "expired"); ok || err != nil {
		t.Fatalf("expire before the expiry: %v, %v", ok, err)
	}
	later := at(2 * time.Minute)
	if err := s.RenewSession(ctx, "n", "s", later, at(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The renewal moved the expiry: a sweep at the old one claims nothing.
	if ok, _ := s.ExpireSession(ctx, "n", "s", "c1", at(90*time.Second), "expired"); ok {
		t.Fatal("the sweep expired a renewed session at its old expiry")
	}
	// Another container under the same id is not this row's to expire.
	if ok, _ := s.ExpireSession(ctx, "n", "s", "c2", at(3*time.Minute), "expired"); ok {
		t.Fatal("expired the row of another container")
	}
	// Past the expiry, a renewal is refused and the sweep's claim wins once.
	if err := s.RenewSession(ctx, "n", "s", at(time.Hour), at(3*time.Minute)); !errors.Is(err, store.ErrExpired) {
		t.Fatalf("renew after the expiry: %v, want ErrExpired", err)
	}
	if ok, err := s.ExpireSession(ctx, "n", "s", "c1", at(3*time.Minute), "expired: ttl"); !ok || err != nil {
		t.Fatalf("expire after the expiry: %v, %v", ok, err)
	}
	if ok, _ := s.ExpireSession(ctx, "n", "s", "c1", at(3*time.Minute), "expired"); ok {
		t.Fatal("expired twice")
	}
	if err := s.RenewSession(ctx, "n", "s", at(time.Hour), at(3*time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renew a stopped session: %v, want ErrNotFound", err)
	}
	if err := s.RenewSession(ctx, "n", "none", at(time.Hour), at(0)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renew no session: %v, want ErrNotFound", err)
	}
}

func TestSetPaused(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	if err := s.PutSession(ctx, store.Session{Namespace: "n", ID: "s", Key: "k", ContainerID: "c1", Created: at(0), LastUsed: at(0)}); err != nil {
		t.Fatal(err)
	}
	p := time.UnixMilli(at(time.Second).UnixMilli()).UTC()
	if err := s.SetPaused(ctx, "n", "s", p); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Session(ctx, "n", "s"); !got.Paused.Equal(p) {
		t.Fatalf("paused %v, want %v", got.Paused, p)
	}
	if err := s.SetPaused(ctx, "n", "s", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Session(ctx, "n", "s"); !got.Paused.IsZero() {
		t.Fatalf("resumed, still paused at %v", got.Paused)
	}
	// A new container for the key (PutSession) is never paused.
	_ = s.SetPaused(ctx, "n", "s", p)
	_ = s.PutSession(ctx, store.Session{Namespace: "n", ID: "s", Key: "k", ContainerID: "c2", Created: at(0), LastUsed: at(0)})
	if got, _ := s.Session(ctx, "n", "s"); !got.Paused.IsZero() {
		t.Fatal("a new container inherited the pause")
	}
	if err := s.SetPaused(ctx, "n", "none", p); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pause no session: %v", err)
	}
}

func TestSessionLiveness(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	if _, err := s.SessionLiveness(ctx, "n", "s"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no session: %v", err)
	}
	exp := time.UnixMilli(at(time.Minute).UnixMilli()).UTC()
	_ = s.PutSession(ctx, store.Session{Namespace: "n", ID: "s", Key: "k", ContainerID: "c1", Created: at(0), LastUsed: at(0), Expires: exp})
	_ = s.SetPaused(ctx, "n", "s", exp)
	l, err := s.SessionLiveness(ctx, "n", "s")
	if err != nil || l.ContainerID != "c1" || l.Stopped || !l.Expires.Equal(exp) || !l.Paused.Equal(exp) {
		t.Fatalf("got %+v, %v", l, err)
	}
	_ = s.StopSession(ctx, "n", "s", at(time.Second), "stopped")
	if l, _ := s.SessionLiveness(ctx, "n", "s"); !l.Stopped {
		t.Fatal("stopped session not stopped")
	}
}

// TestResumeCountsAsUse: resuming a paused session counts as its last use,
// so the idle sweep does not take it at once for having been paused long.
func TestResumeCountsAsUse(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	if err := s.PutSession(ctx, store.Session{Namespace: "n", ID: "s", Key: "k", ContainerID: "c1", Created: at(0), LastUsed: at(0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPaused(ctx, "n", "s", at(time.Second)); err != nil {
		t.Fatal(err)
	}
	resumed := time.UnixMilli(at(time.Hour).UnixMilli()).UTC()
	if err := s.ResumeSession(ctx, "n", "s", resumed); err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(ctx, "n", "s")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Paused.IsZero() {
		t.Errorf("resumed, still paused at %v", got.Paused)
	}
	if !got.LastUsed.Equal(resumed) {
		t.Errorf("resuming a paused session counts as use: last used %v, want the resume at %v", got.LastUsed, resumed)
	}
	// An eviction decided on the use before the pause is refused.
	if ok, err := s.EvictSession(ctx, "n", "s", "c1", at(0), at(time.Hour+time.Second), "idle"); err != nil || ok {
		t.Errorf("resuming a paused session counts as use: evicted on the use before the pause (%v, %v)", ok, err)
	}
	if err := s.ResumeSession(ctx, "n", "none", resumed); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resume no session: %v, want ErrNotFound", err)
	}
}
