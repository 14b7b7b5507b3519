package sessiontest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// The tenant quotas (TENANT_MAX_*) through the fake driver: a tenant is
// the keys sharing a prefix up to the first "/", as agentbox serve makes
// them.

func tenantOf(key string) (string, bool) {
	i := strings.IndexByte(key, '/')
	if i <= 0 {
		return "", false
	}
	return key[:i+1], true
}

func quotaManager(t *testing.T, d *sessiontest.Driver, edit func(*config.Config)) *session.Manager {
	t.Helper()
	cfg := testConfig(t, func(c *config.Config) {
		c.TenantMaxSandboxes, c.TenantMaxMemoryMB, c.TenantMaxInflight, c.TenantMaxArtifactMB = 0, 0, 0, 0
		edit(c)
	})
	return startManager(t, d, cfg, session.WithQuotaGroup(tenantOf))
}

// wantQuota fails unless err is a *session.QuotaError of limit, naming
// setting in its message.
func wantQuota(t *testing.T, err error, limit, setting string) {
	t.Helper()
	var qe *session.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, session.ErrQuota) {
		t.Fatalf("got %v, want a quota error of %s", err, limit)
	}
	if qe.Limit != limit || qe.Setting != setting || !strings.Contains(err.Error(), setting) {
		t.Fatalf("got %+v (%v), want limit %s named by %s", qe, err, limit, setting)
	}
}

func TestQuotaSandboxes(t *testing.T) {
	d := sessiontest.NewDriver()
	m := quotaManager(t, d, func(c *config.Config) { c.TenantMaxSandboxes = 2 })
	ctx := t.Context()
	for _, key := range []string{"tA/1", "tA/2", "tB/1"} {
		if _, err := m.Start(ctx, key); err != nil {
			t.Fatalf("start %s: %v", key, err)
		}
	}
	created := d.Created()
	_, err := m.Start(ctx, "tA/3")
	wantQuota(t, err, "sandboxes", "TENANT_MAX_SANDBOXES")
	_, err = m.Exec(ctx, "tA/4", "1") // creates implicitly: refused too
	wantQuota(t, err, "sandboxes", "TENANT_MAX_SANDBOXES")
	if d.Created() != created {
		t.Fatalf("a refused session created a container: %d, then %d", created, d.Created())
	}
	// Its existing sessions still run; another tenant is not held back.
	mustExec(t, m, "tA/1", "x = 1")
	mustExec(t, m, "tB/2", "x = 1")
	// A key of no tenant has no quota.
	for i := range 3 {
		mustExec(t, m, fmt.Sprintf("plain-%d", i), "1")
	}
	// An ended session frees its place.
	if err := m.Stop(ctx, "tA/1"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, m, "tA/3", "1")
}

// TestQuotaSandboxesRace: many creations at once for one tenant at its
// limit: exactly as many as the limit win.
func TestQuotaSandboxesRace(t *testing.T) {
	for round := range 30 {
		d := sessiontest.NewDriver()
		m := quotaManager(t, d, func(c *config.Config) { c.TenantMaxSandboxes = 2 })
		var ok, refused atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := m.Exec(t.Context(), fmt.Sprintf("tA/r%d-%d", round, i), "1")
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, session.ErrQuota):
					refused.Add(1)
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if ok.Load() != 2 || refused.Load() != 14 || d.Created() != 2 {
			t.Fatalf("round %d: %d created, %d refused, %d containers; want 2, 14, 2", round, ok.Load(), refused.Load(), d.Created())
		}
	}
}

func TestQuotaMemory(t *testing.T) {
	d := sessiontest.NewDriver()
	m := quotaManager(t, d, func(c *config.Config) {
		c.MemoryMB, c.MaxMemoryMB, c.TenantMaxMemoryMB = 1024, 4096, 2048
	})
	ctx := t.Context()
	if _, err := m.Start(ctx, "tA/1"); err != nil { // 1024
		t.Fatal(err)
	}
	_, err := m.Start(ctx, "tA/2", session.MemoryMB(1536))
	wantQuota(t, err, "memory", "TENANT_MAX_MEMORY_MB")
	if !strings.Contains(err.Error(), "1024 MiB in use") || !strings.Contains(err.Error(), "1536 MiB") {
		t.Errorf("the message says neither what is used nor what was asked: %v", err)
	}
	if _, err := m.Start(ctx, "tA/2", session.MemoryMB(1024)); err != nil {
		t.Fatalf("up to the limit: %v", err)
	}
	if _, err := m.Start(ctx, "tB/1", session.MemoryMB(2048)); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
}

// TestQuotaInflight counts executions running or waiting for their
// session's turn, over all of a tenant's sessions.
func TestQuotaInflight(t *testing.T) {
	d := sessiontest.NewDriver()
	m := quotaManager(t, d, func(c *config.Config) { c.TenantMaxInflight = 2 })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, key := range []string{"tA/1", "tA/2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = m.Exec(ctx, key, "sleep(60)", session.OnEvent(func(ev kernel.Event) {
				if ev.Type == kernel.EventStarted {
					started <- struct{}{}
				}
			}))
		}()
	}
	for range 2 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the executions did not start")
		}
	}
	// Bounded: without the quota it would wait for tA/1's turn.
	short, stop := context.WithTimeout(t.Context(), 5*time.Second)
	defer stop()
	_, err := m.Exec(short, "tA/1", "1")
	wantQuota(t, err, "inflight", "TENANT_MAX_INFLIGHT")
	_, err = m.Exec(t.Context(), "tA/3", "1")
	wantQuota(t, err, "inflight", "TENANT_MAX_INFLIGHT")
	mustExec(t, m, "tB/1", "1")
	cancel()
	wg.Wait()
	mustExec(t, m, "tA/1", "1")
}

// TestQuotaArtifacts refuses the next execution of a tenant whose stored
// artifacts reach TENANT_MAX_ARTIFACT_MB; ArtifactBytes says how much.
func TestQuotaArtifacts(t *testing.T) {
	d := sessiontest.NewDriver()
	var dbPath string
	m := quotaManager(t, d, func(c *config.Config) { c.TenantMaxArtifactMB = 1; dbPath = c.ArtifactsDB })
	st, err := store.Open(t.Context(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ix := artifacts.NewIndex(st)
	for i, size := range []int64{600 << 10, 500 << 10} {
		key := fmt.Sprintf("tA/%d", i)
		if _, err := ix.Add(t.Context(), artifacts.Artifact{Namespace: m.Namespace(), SessionID: session.ID(key), SessionKey: key,
			Name: "f.bin", SHA256: strings.Repeat("b", 64), Size: size}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := m.ArtifactBytes(t.Context(), "tA/"); err != nil || n != 1100<<10 {
		t.Fatalf("ArtifactBytes(tA/) = %d, %v; want %d", n, err, 1100<<10)
	}
	_, err = m.Exec(t.Context(), "tA/0", "1")
	wantQuota(t, err, "artifacts", "TENANT_MAX_ARTIFACT_MB")
	mustExec(t, m, "tB/0", "1")
}

// TestQueuedExecutionDropped: an execution waiting for its session's turn
// whose caller leaves (QueueContext ends) is dropped, never run later.
func TestQueuedExecutionDropped(t *testing.T) {
	// With room for two in flight, a probe refused for the quota shows
	// the second execution is in (queued behind the first).
	m := quotaManager(t, sessiontest.NewDriver(), func(c *config.Config) { c.TenantMaxInflight = 2 })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started := make(chan struct{}, 1)
	first := make(chan error, 1)
	go func() {
		_, err := m.Exec(ctx, "tA/k", "sleep(60)", session.OnEvent(func(ev kernel.Event) {
			if ev.Type == kernel.EventStarted {
				started <- struct{}{}
			}
		}))
		first <- err
	}()
	<-started
	qctx, leave := context.WithCancel(t.Context())
	queued := make(chan error, 1)
	go func() {
		for {
			_, err := m.Exec(context.WithoutCancel(qctx), "tA/k", "dropped = 1", session.QueueContext(qctx))
			if !errors.Is(err, session.ErrQuota) { // a probe held the slot: again
				queued <- err
				return
			}
		}
	}()
	for {
		_, err := m.Exec(t.Context(), "tA/probe", "1")
		if errors.Is(err, session.ErrQuota) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	leave()
	select {
	case err := <-queued:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("queued execution whose caller left: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued execution waits on after its caller left")
	}
	cancel()
	<-first
	if res := mustExec(t, m, "tA/k", "dropped"); res.Error == nil || res.Error.Name != "NameError" {
		t.Fatalf("the dropped execution ran later: %+v", res)
	}
}

// TestQuotaAdmit: a place taken before the call (a server that must
// answer 429 before it streams) is the call's own, counted once, and given
// back by the call that took it.
func TestQuotaAdmit(t *testing.T) {
	m := quotaManager(t, sessiontest.NewDriver(), func(c *config.Config) { c.TenantMaxInflight = 1 })
	ctx := t.Context()
	a, err := m.Admit(ctx, "tA/1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Admit(ctx, "tA/2")
	wantQuota(t, err, "inflight", "TENANT_MAX_INFLIGHT")
	if _, err := m.Admit(ctx, "tB/1"); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	mustExec(t, m, "tA/1", "1", session.Admitted(a)) // not counted twice
	b, err := m.Admit(ctx, "tA/1")
	if err != nil {
		t.Fatalf("the execution did not give its place back: %v", err)
	}
	a.Release() // taken by the execution: gives nothing back twice
	_, err = m.Admit(ctx, "tA/3")
	wantQuota(t, err, "inflight", "TENANT_MAX_INFLIGHT")
	b.Release()
	if _, err := m.Admit(ctx, "tA/3"); err != nil {
		t.Fatalf("after Release: %v", err)
	}
}

// TestQuotaFreedByLostContainer: a session whose container was removed
// behind the Manager's back (an engine restart, docker rm) stops counting
// once the sweep sees it gone, so the tenant is not held at its limit by
// sandboxes that no longer exist.
func TestQuotaFreedByLostContainer(t *testing.T) {
	d := sessiontest.NewDriver()
	cfg := testConfig(t, func(c *config.Config) {
		c.TenantMaxSandboxes, c.TenantMaxMemoryMB, c.TenantMaxInflight, c.TenantMaxArtifactMB = 1, 0, 0, 0
	})
	m := startManager(t, d, cfg, session.WithQuotaGroup(tenantOf), session.WithSweepInterval(20*time.Millisecond), session.WithOrphanGrace(0))
	in, err := m.Start(t.Context(), "tA/1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Start(t.Context(), "tA/2")
	wantQuota(t, err, "sandboxes", "TENANT_MAX_SANDBOXES")
	d.RemoveBehindBack(in.ContainerID)
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := m.Start(t.Context(), "tA/2")
		if err == nil {
			break
		}
		if !errors.Is(err, session.ErrQuota) || time.Now().After(deadline) {
			t.Fatalf("after its only container was removed, the tenant is still refused: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // the sweep's interval
	}
}

// BenchmarkExecQuota prices the quotas on the execution path (the fake
// kernel: the Manager's own work): none, and every limit on.
func BenchmarkExecQuota(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("quota=%v", on), func(b *testing.B) {
			cfg := testConfig(b, func(c *config.Config) {
				if !on {
					c.TenantMaxSandboxes, c.TenantMaxMemoryMB, c.TenantMaxInflight, c.TenantMaxArtifactMB = 0, 0, 0, 0
				}
			})
			var opts []session.Option
			if on {
				opts = append(opts, session.WithQuotaGroup(tenantOf))
			}
			m := startManager(b, sessiontest.NewDriver(), cfg, opts...)
			if _, err := m.Exec(b.Context(), "tA/1", "1"); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := m.Exec(b.Context(), "tA/1", "1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSweepNeverEndsASessionBornAfterItsList: the sweep that records the
// end of sessions whose containers vanished (so they stop counting against
// quotas) lists the containers, then reads the rows; a session created in
// between has a row and no container in that list, and must not be taken
// for one removed behind the Manager's back, whatever the grace period.
func TestSweepNeverEndsASessionBornAfterItsList(t *testing.T) {
	d := sessiontest.NewDriver()
	cfg := testConfig(t, func(c *config.Config) {
		c.TenantMaxSandboxes, c.TenantMaxMemoryMB, c.TenantMaxInflight, c.TenantMaxArtifactMB = 100, 0, 0, 0
	})
	m := startManager(t, d, cfg, session.WithQuotaGroup(tenantOf), session.WithSweepInterval(time.Millisecond), session.WithOrphanGrace(0))
	const n = 40
	for i := range n {
		if _, err := m.Start(t.Context(), fmt.Sprintf("tA/%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	list, err := m.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if _, err := m.Info(t.Context(), in.Key); err != nil || in.State != session.StateRunning {
			t.Errorf("session %s: state %s, %v", in.Key, in.State, err)
		}
	}
	// The quota sees all of them: the 41st of a limit of 40 is refused.
	cfg.TenantMaxSandboxes = n
	m2 := startManager(t, d, cfg, session.WithQuotaGroup(tenantOf))
	_, err = m2.Start(t.Context(), "tA/extra")
	wantQuota(t, err, "sandboxes", "TENANT_MAX_SANDBOXES")
}
