package session_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// quietManager is a Manager on driver d whose sweep runs once, at its
// start, and then not for an hour: what a view says cannot come from a
// sweep (issue 24 row 8: with only CLI processes, none may run).
func quietManager(t *testing.T, cfg config.Config, d *sessiontest.Driver, opts ...session.Option) *session.Manager {
	t.Helper()
	m, err := session.NewManager(context.Background(), cfg, append([]session.Option{session.WithDriver(d), session.WithSweepInterval(time.Hour)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func fakeConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	return cfg
}

// waitPast waits until the clock has passed t.
func waitPast(t *testing.T, at time.Time) {
	t.Helper()
	for !time.Now().After(at) {
		time.Sleep(time.Until(at) + time.Millisecond)
	}
}

// TestExpiredReadsExpiredWithoutSweep: once a session's time to live has
// passed, Info says stopped with the expiry as its reason and List says
// "expired", in the process that made it and in another, before any sweep
// removed it (its container is still in the engine). The next lookup says
// ErrExpired, the next Exec starts a fresh session that says the old one
// expired, as the README says. Before, both said "running" until a sweep
// ran.
func TestExpiredReadsExpiredWithoutSweep(t *testing.T) {
	cfg := fakeConfig(t)
	d := sessiontest.NewDriver()
	a := quietManager(t, cfg, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := a.Start(ctx, "k", session.TTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ctx, "k", "x = 1"); err != nil {
		t.Fatal(err)
	}
	if in.State != session.StateRunning || in.Expires.IsZero() {
		t.Fatalf("a new session with a time to live: %+v", in)
	}
	waitPast(t, in.Expires)
	// a's sweep ran once, before the session existed: what it says
	// cannot come from a removal.
	checkExpiredInfo(t, ctx, a, "its manager")
	list, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].State != session.StateExpired || !strings.HasPrefix(list[0].StopReason, "expired") {
		t.Errorf("List of an expired session: %+v; want state %q", list, session.StateExpired)
	}
	if n := len(d.Containers()); n != 1 {
		t.Fatalf("%d containers: the views must not depend on a removal", n)
	}
	// Another process, as each CLI command is (its sweep at start may
	// remove the container meanwhile: the answers are the same).
	b := quietManager(t, cfg, d)
	checkExpiredInfo(t, ctx, b, "another manager")
	// The next use, as the README says: a lookup is refused, an Exec
	// runs in a fresh session that says why the state is gone.
	if _, err := b.Inspect(ctx, "k"); !errors.Is(err, session.ErrExpired) {
		t.Errorf("inspect past the expiry: %v, want ErrExpired", err)
	}
	res, err := b.Exec(ctx, "k", "x")
	if err != nil {
		t.Fatal(err)
	}
	if !res.StateLost || !strings.Contains(res.RestartReason, "expired") {
		t.Errorf("exec past the expiry: state lost %v (%s), want a fresh session saying the old one expired", res.StateLost, res.RestartReason)
	}
}

func checkExpiredInfo(t *testing.T, ctx context.Context, m *session.Manager, name string) {
	t.Helper()
	got, err := m.Info(ctx, "k")
	if err != nil {
		t.Fatalf("%s: info: %v", name, err)
	}
	if got.State != session.StateStopped || !strings.HasPrefix(got.StopReason, "expired: its time to live ended at ") {
		t.Errorf("%s: Info of an expired session: state %q, reason %q; want stopped, expired", name, got.State, got.StopReason)
	}
}
