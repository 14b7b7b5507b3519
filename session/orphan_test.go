package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/session"
)

// TestUnusableContainersRemovedAfterGrace: labelled containers that no
// manager can use (exited, of this image or another) are removed once older
// than the grace period; a running one of another image (another manager's
// session, as far as this one knows) and a usable one of another manager
// process are left alone, and the latter is reattached.
func TestUnusableContainersRemovedAfterGrace(t *testing.T) {
	t.Parallel()
	cli := dockertest.Engine(t)
	ctx := context.Background()
	cfg := testConfig(t, nil)
	ns := namespace()
	other := variantImage(t) // another image id, whatever labels the image has

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
	foreign := start(session.ID("foreign"), other, "python3", "-c", "pass")
	foreignLive := start(session.ID("foreign-live"), other, "sleep", "600")

	// A live session made by another manager process.
	live := managerFor(t, cfg, ns)
	mustExec(t, live, "live", "x = 5")

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
	if gone(foreignLive) {
		t.Fatalf("a running container of another image was removed for its image")
	}
	if res := mustExec(t, m, "live", "x"); plain(res) != "5" {
		t.Fatalf("live session of another manager: %+v", res)
	}
}
