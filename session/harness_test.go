package session_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/session"
)

// testConfig is the configuration of a test manager: the current image, the
// runtime AGENTBOX_TEST_RUNTIME names, everything on disk under a temporary
// folder.
func testConfig(t testing.TB, edit func(*config.Config)) config.Config {
	t.Helper()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.SandboxImage = dockertest.Image(t)
	cfg.Runtime = dockertest.Runtime(t) // AGENTBOX_TEST_RUNTIME=runsc: the same tests under gVisor
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.InterruptGrace = 2 * time.Second
	cfg.TmpfsSizeMB = 64
	cfg.SessionDiskMB = 64 // BIND: each session allocates its disk in full
	if edit != nil {
		edit(&cfg)
	}
	return cfg
}

// namespace returns a namespace of its own for a test, so that parallel test
// binaries never see each other's containers.
func namespace() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "t-" + hex.EncodeToString(b[:])
}

// newManager starts a manager on the real engine in a namespace of its own;
// its containers are removed when the test ends.
func newManager(t testing.TB, edit func(*config.Config), opts ...session.Option) *session.Manager {
	t.Helper()
	cfg := testConfig(t, edit)
	return managerFor(t, cfg, namespace(), opts...)
}

// managerFor starts a manager for cfg in namespace ns (a second manager on
// the same namespace plays the part of a new process).
func managerFor(t testing.TB, cfg config.Config, ns string, opts ...session.Option) *session.Manager {
	t.Helper()
	cli := dockertest.Engine(t)
	base := []session.Option{
		session.WithNamespace(ns),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}),
	}
	ctx := context.Background()
	m, err := session.NewManager(ctx, cfg, append(base, opts...)...)
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
		if err := dockertest.Sweep(ctx, cli, session.LabelNamespace+"="+ns); err != nil {
			t.Errorf("sweep: %v", err)
		}
		// The sessions' disks stay mounted while a manager may come back
		// for them; the test's folder goes now.
		mounts := hostMounts(t, cfg.SessionsRoot)
		for i := len(mounts) - 1; i >= 0; i-- {
			if err := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", mounts[i], err)
			}
		}
	})
	return m
}

func mustExec(t testing.TB, m *session.Manager, key, code string, opts ...session.ExecOption) *session.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := m.Exec(ctx, key, code, opts...)
	if err != nil {
		t.Fatalf("exec %q: %v", code, err)
	}
	return res
}

func plain(res *session.Result) string {
	for _, o := range res.Outputs {
		if o.Kind == "execute_result" {
			return o.Data["text/plain"]
		}
	}
	return ""
}

// openStore opens cfg's database, as another process would, until the
// test ends.
func openStore(t *testing.T, cfg config.Config) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), cfg.ArtifactsDB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
