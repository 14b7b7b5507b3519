package sessiontest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestForeignImageIsNamed: SANDBOX_IMAGE naming an image that is not an
// agentbox sandbox image (debian:bookworm, no io.agentbox labels) is
// refused as such, with what to do, not as a "stale" image speaking
// protocol "" (issue 24 row 11). Callers that handle a stale image (run
// sandbox-setup) still match it.
func TestForeignImageIsNamed(t *testing.T) {
	d := sessiontest.NewDriver()
	d.AddImage("debian:bookworm", nil)
	d.AddImage("python:3.11", map[string]string{"maintainer": "someone"})
	for _, ref := range []string{"debian:bookworm", "python:3.11"} {
		cfg := testConfig(t, func(c *config.Config) { c.SandboxImage = ref })
		_, err := session.NewManager(context.Background(), cfg, session.WithDriver(d))
		if !errors.Is(err, session.ErrNotSandboxImage) || !errors.Is(err, session.ErrImageStale) {
			t.Fatalf("image %s: %v, want ErrNotSandboxImage (and ErrImageStale)", ref, err)
		}
		msg := err.Error()
		for _, want := range []string{"not an agentbox sandbox image", ref, "no label io.agentbox.protocol", "sandbox-setup", "agentbox-sandbox:latest"} {
			if !strings.Contains(msg, want) {
				t.Errorf("image %s: %q does not say %q", ref, msg, want)
			}
		}
		if strings.Contains(msg, `protocol ""`) {
			t.Errorf("image %s: %q still speaks of protocol \"\"", ref, msg)
		}
	}

	// An image of ours made by another version stays "stale".
	d.AddImage("stale:1", map[string]string{"io.agentbox.protocol": "0"})
	cfg := testConfig(t, func(c *config.Config) { c.SandboxImage = "stale:1" })
	_, err := session.NewManager(context.Background(), cfg, session.WithDriver(d))
	if !errors.Is(err, session.ErrImageStale) || errors.Is(err, session.ErrNotSandboxImage) {
		t.Fatalf("stale image: %v, want ErrImageStale only", err)
	}

	// One of SANDBOX_IMAGES that is foreign is refused by name when asked for.
	m := startManager(t, d, testConfig(t, func(c *config.Config) {
		c.SandboxImages = map[string]string{"deb": "debian:bookworm"}
	}))
	_, err = m.Start(context.Background(), "k", session.UseImage("deb"))
	if !errors.Is(err, session.ErrImageNotAllowed) || !errors.Is(err, session.ErrNotSandboxImage) {
		t.Fatalf("start with a foreign SANDBOX_IMAGES entry: %v, want ErrImageNotAllowed caused by ErrNotSandboxImage", err)
	}
}
