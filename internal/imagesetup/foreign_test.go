package imagesetup_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
)

// TestEnsureLeavesForeignImage: SANDBOX_IMAGE naming another program's
// image (no agentbox labels, as debian:bookworm) is said to be no sandbox
// image, and sandbox-setup does not build ours over its tag (issue 24 row
// 11: "build one with sandbox-setup" must not clobber the image named).
func TestEnsureLeavesForeignImage(t *testing.T) {
	cli := dockertest.Engine(t)
	foreign := dockertest.ForeignImage(t, "agentbox-test-foreign")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := cli.InspectImage(ctx, foreign)
	if err != nil {
		t.Fatal(err)
	}
	st, err := imagesetup.Check(ctx, cli, foreign)
	if err != nil || !st.Present || !st.Foreign || st.Current {
		t.Fatalf("Check: %+v, %v; want present and foreign", st, err)
	}
	var out bytes.Buffer
	_, err = imagesetup.Ensure(ctx, cli, imagesetup.Options{Image: foreign, NoPull: true, Out: &out})
	if !errors.Is(err, imagesetup.ErrNotSandboxImage) || !strings.Contains(err.Error(), foreign) || !strings.Contains(err.Error(), "SANDBOX_IMAGE") {
		t.Fatalf("Ensure: %v, want ErrNotSandboxImage naming the image and SANDBOX_IMAGE\noutput:\n%s", err, out.String())
	}
	after, err := cli.InspectImage(ctx, foreign)
	if err != nil || after.ID != before.ID {
		t.Fatalf("the foreign image changed: %s → %s (%v)", before.ID, after.ID, err)
	}
}
