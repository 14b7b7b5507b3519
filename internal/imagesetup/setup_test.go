package imagesetup_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

func suffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func timeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestCheckCurrentImage(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	st, err := imagesetup.Check(timeout(t, time.Minute), cli, image)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !st.Present || !st.Current {
		t.Fatalf("Check(%s) = %+v, want present and current", image, st)
	}
	if st.Protocol != kernel.ProtocolVersion {
		t.Errorf("Protocol = %d, want %d", st.Protocol, kernel.ProtocolVersion)
	}
	if st.SourceHash != sandboximage.SourceHash() || st.WantHash != sandboximage.SourceHash() {
		t.Errorf("SourceHash = %q, WantHash = %q, want both %q", st.SourceHash, st.WantHash, sandboximage.SourceHash())
	}
	if st.ID == "" {
		t.Error("ID is empty")
	}
}

func TestCheck(t *testing.T) {
	cli := dockertest.Engine(t)
	stale := dockertest.StaleImage(t, "agentbox-test-stale")
	missing := "agentbox-test-missing:" + suffix(t)
	tests := []struct {
		name        string
		image       string
		wantPresent bool
	}{
		{"stale", stale, true},
		{"missing", missing, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := imagesetup.Check(timeout(t, time.Minute), cli, tt.image)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if st.Present != tt.wantPresent || st.Current {
				t.Fatalf("Check(%s) = %+v, want Present=%v and not Current", tt.image, st, tt.wantPresent)
			}
			if st.WantHash != sandboximage.SourceHash() {
				t.Errorf("WantHash = %q, want %q", st.WantHash, sandboximage.SourceHash())
			}
			if tt.wantPresent && (st.SourceHash != "0000" || st.Protocol != kernel.ProtocolVersion) {
				t.Errorf("labels read as hash %q, protocol %d; want 0000, %d", st.SourceHash, st.Protocol, kernel.ProtocolVersion)
			}
		})
	}
}

// TestEnsureRebuildsStaleImage is what happens after the embedded sources
// change: the image is rebuilt on the base bootstrapped earlier (no new
// bootstrap, no pull), and is then current.
func TestEnsureRebuildsStaleImage(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t) // the base and the build cache exist
	// A rebuild from the cache takes seconds; on a loaded machine minutes.
	// Bounded below go test's timeout, so that a stuck step fails here,
	// with the output so far, instead of the whole binary being killed.
	ctx, cancel := dockertest.Bound(t, 8*time.Minute)
	t.Cleanup(cancel)
	current, err := cli.InspectImage(ctx, image)
	if err != nil {
		t.Fatal(err)
	}
	// Ensure picks the bootstrapped base by itself; an image built on
	// another base (debian:forky-slim, --base) is rebuilt on that one, named,
	// so that this test can never bootstrap or pull.
	opts := imagesetup.Options{NoPull: true}
	base := current.Labels[sandboximage.LabelBase]
	if base == "" {
		t.Fatalf("%s has no %s label", image, sandboximage.LabelBase)
	}
	if base != imagesetup.BootstrapTag(imagesetup.DefaultSuite) {
		t.Logf("%s was built on %s, not on a bootstrapped base: rebuilding on it", image, base)
		opts.Base = base
	}
	tag := dockertest.StaleImage(t, "agentbox-test-rebuild")
	opts.Image = tag

	var buf bytes.Buffer
	opts.Out = &buf
	start := time.Now()
	res, err := imagesetup.Ensure(ctx, cli, opts)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Ensure on a stale image, after %s: %v\noutput so far (its last line is the step that did not finish):\n%s", elapsed.Round(time.Second), err, buf.String())
	}
	t.Logf("rebuild took %s", elapsed.Round(time.Millisecond))
	if !res.Built {
		t.Fatalf("Ensure on a stale image: Built = false\noutput:\n%s", buf.String())
	}
	if res.Base != base {
		t.Errorf("Base = %q, want %q (the base of %s)", res.Base, base, image)
	}
	if strings.Contains(buf.String(), "debootstrap") {
		t.Errorf("Ensure bootstrapped again; output:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "is stale") {
		t.Errorf("output does not say the image is stale:\n%s", buf.String())
	}

	st, err := imagesetup.Check(ctx, cli, tag)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !st.Present || !st.Current || st.Protocol != kernel.ProtocolVersion {
		t.Fatalf("Check after rebuild = %+v, want present, current, protocol %d", st, kernel.ProtocolVersion)
	}
	if st.ID != res.ID {
		t.Errorf("Check ID %s != Ensure ID %s", st.ID, res.ID)
	}

	buf.Reset()
	res2, err := imagesetup.Ensure(ctx, cli, opts)
	if err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if res2.Built || res2.ID != res.ID {
		t.Fatalf("second Ensure = %+v, want Built=false and ID %s", res2, res.ID)
	}
	if !strings.Contains(buf.String(), "nothing to do") {
		t.Errorf("second Ensure output %q lacks %q", buf.String(), "nothing to do")
	}
}

func TestRunOnce(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	ctx := timeout(t, time.Minute)

	out, err := imagesetup.RunOnce(ctx, cli, image, []string{"sh", "-c", "echo hello; id -u"})
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	if out != "hello\n1000\n" {
		t.Errorf("stdout = %q, want %q", out, "hello\n1000\n")
	}

	out, err = imagesetup.RunOnce(ctx, cli, image, []string{"sh", "-c", "echo partial; echo something broke >&2; exit 3"})
	if err == nil {
		t.Fatalf("RunOnce of a failing command: no error (stdout %q)", out)
	}
	for _, want := range []string{"sh exited with code 3", "something broke"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if out != "partial\n" {
		t.Errorf("stdout = %q, want %q", out, "partial\n")
	}
}

// TestBootstrapRefuses checks the refusals that come before any work, so it
// never bootstraps: with PATH empty, debootstrap cannot be found (as root), and
// as any other user root is asked for first.
func TestBootstrapRefuses(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ctx := timeout(t, 10*time.Second)
	var out bytes.Buffer
	tag := "agentbox-test-bootstrap:" + suffix(t)
	err := imagesetup.Bootstrap(ctx, nil, tag, imagesetup.DefaultSuite, imagesetup.DefaultMirror, &out)
	if !errors.Is(err, imagesetup.ErrCannotBootstrap) {
		t.Fatalf("Bootstrap err = %v, want ErrCannotBootstrap", err)
	}
	want := "apt-get install -y debootstrap"
	if os.Geteuid() != 0 {
		want = "debootstrap needs root"
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
	if out.Len() != 0 {
		t.Errorf("Bootstrap started work before refusing:\n%s", out.String())
	}
}
