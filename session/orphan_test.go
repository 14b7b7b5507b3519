package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
	"github.com/agentbox/agentbox/session"
)

// TestUnusableContainersRemovedAfterGrace: labelled containers that no
// manager can use (one exited, one running another image) are removed once
// older than the grace period; a usable one of another manager process is
// left alone and reattached.
func TestUnusableContainersRemovedAfterGrace(t *testing.T) {
	t.Parallel()
	cli := dockertest.Engine(t)
	ctx := context.Background()
	cfg := testConfig(t, nil)
	ns := namespace()

	img, err := cli.InspectImage(ctx, cfg.SandboxImage)
	if err != nil {
		t.Fatal(err)
	}
	base := img.Labels[sandboximage.LabelBase]
	if base == "" {
		t.Skip("the sandbox image does not name its base image")
	}
	start := func(name, image string, cmd ...string) string {
		spec := imagesetup.LockedDown(image)
		spec.Name = ns + "_" + name
		spec.Entrypoint = cmd
		spec.Labels = map[string]string{dockertest.LabelTest: t.Name(), session.LabelNamespace: ns, session.LabelRole: session.RoleSession}
		id, err := cli.CreateContainer(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.RemoveContainer(context.Background(), id) })
		return id
	}
	exited := start(session.ID("exited"), cfg.SandboxImage, "python3", "-c", "pass")
	foreign := start(session.ID("foreign"), base, "sleep", "600")

	// A live session made by another manager process.
	other := managerFor(t, cfg, ns)
	mustExec(t, other, "live", "x = 5")

	m := managerFor(t, cfg, ns, session.WithOrphanGrace(time.Second), session.WithSweepInterval(200*time.Millisecond))
	gone := func(id string) bool {
		_, err := cli.InspectContainer(ctx, id)
		return err != nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for !gone(exited) || !gone(foreign) {
		if time.Now().After(deadline) {
			t.Fatalf("unusable containers not removed: exited gone %v, foreign gone %v", gone(exited), gone(foreign))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if res := mustExec(t, m, "live", "x"); plain(res) != "5" {
		t.Fatalf("live session of another manager: %+v", res)
	}
}
