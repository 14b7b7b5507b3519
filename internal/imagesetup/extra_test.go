package imagesetup_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/session"
)

func TestValidPackage(t *testing.T) {
	for name, want := range map[string]bool{
		"python3-tabulate": true, "libstdc++6": true, "python3.13": true, "g++": true,
		"": false, "a": false, "Python3-x": false, "-x": false, "x y": false, "x;rm": false, "x_y": false,
	} {
		if got := imagesetup.ValidPackage(name); got != want {
			t.Errorf("ValidPackage(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestExtraHashIsOrderFree(t *testing.T) {
	a := imagesetup.ExtraHash([]string{"b", "a", "a"}, "sha256:1")
	if b := imagesetup.ExtraHash([]string{"a", "b"}, "sha256:1"); a != b {
		t.Errorf("hash depends on order or duplicates")
	}
	if c := imagesetup.ExtraHash([]string{"a", "b"}, "sha256:2"); a == c {
		t.Errorf("hash ignores the base image")
	}
	if df := imagesetup.ExtraDockerfile("base:1", []string{"b", "a"}); !strings.Contains(df, "--no-install-recommends a b ") || !strings.HasSuffix(df, "USER 1000:1000\n") {
		t.Errorf("Dockerfile:\n%s", df)
	}
}

// TestEnsureExtraOnTheEngine builds the sandbox image plus one Debian
// package that brings a module the base lacks (tabulate), imports it in a
// session, and checks that a second build with the same list is a no-op.
func TestEnsureExtraOnTheEngine(t *testing.T) {
	cli := dockertest.Engine(t)
	base := dockertest.Image(t)
	ctx := timeout(t, 15*time.Minute)
	if _, err := imagesetup.RunOnce(ctx, cli, base, []string{"python3", "-c", "import tabulate"}); err == nil {
		t.Fatalf("the base image %s already has tabulate; pick another package for this test", base)
	}
	tag := "agentbox-sandbox:extra-test-" + suffix(t)
	t.Cleanup(func() { _ = cli.RemoveImage(context.Background(), tag) })
	var out bytes.Buffer
	opts := imagesetup.ExtraOptions{Image: tag, Base: base, Packages: []string{"python3-tabulate"}, Out: &out}
	res, err := imagesetup.EnsureExtra(ctx, cli, opts)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !res.Built || !strings.Contains(out.String(), "apt-get") {
		t.Errorf("first build: %+v; no build progress in:\n%s", res, out.String())
	}
	out.Reset()
	again, err := imagesetup.EnsureExtra(ctx, cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Built || again.ID != res.ID || !strings.Contains(out.String(), "nothing to do") {
		t.Errorf("second build with the same list: %+v, want a no-op with ID %s; output:\n%s", again, res.ID, out.String())
	}

	cfg := config.Default()
	dir := t.TempDir()
	cfg.SandboxImage = tag
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	ns := "t-" + suffix(t)[:8]
	m, err := session.NewManager(ctx, cfg, session.WithNamespace(ns),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))
	if err != nil {
		t.Fatalf("a manager refuses the derived image: %v", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = m.Close(cctx)
		_ = dockertest.Sweep(cctx, cli, session.LabelNamespace+"="+ns)
	}()
	r, err := m.Exec(ctx, "extra", "import tabulate\nprint(tabulate.tabulate([[1, 2]]))")
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != nil || !strings.Contains(r.Stdout, "1  2") {
		t.Errorf("import tabulate in a session: stdout %q, error %+v", r.Stdout, r.Error)
	}
}
