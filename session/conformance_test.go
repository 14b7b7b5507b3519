package session_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// TestDriverConformance runs the Driver contract against every driver, so
// that the in-memory one tests rely on cannot drift from the engine.
func TestDriverConformance(t *testing.T) {
	t.Parallel()
	t.Run("fake", func(t *testing.T) {
		runDriverConformance(t, sessiontest.NewDriver(), sessiontest.SandboxImage)
	})
	t.Run("docker", func(t *testing.T) {
		dockertest.Engine(t)
		image := dockertest.Image(t)
		d, closer, err := session.NewDockerDriver()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closer.Close() })
		runDriverConformance(t, d, image)
	})
}

// runDriverConformance checks what session.Manager relies on from a Driver:
// its errors, names, labels and a kernel stream. image must be a current
// sandbox image.
func runDriverConformance(t *testing.T, d session.Driver, image string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := randomSuffix()
	const labelRun, labelPart = "io.agentbox.test.conformance-run", "io.agentbox.test.conformance-part"
	create := func(name, part string) (string, error) {
		id, err := d.Create(ctx, conformanceSpec(image, name, map[string]string{
			dockertest.LabelTest: t.Name(), labelRun: run, labelPart: part,
		}))
		if err == nil {
			t.Cleanup(func() {
				if err := d.Remove(context.Background(), id); err != nil {
					t.Errorf("remove %s: %v", id, err)
				}
			})
		}
		return id, err
	}
	nameA, nameB := "conformance-a-"+run, "conformance-b-"+run

	if _, err := d.Image(ctx, "agentbox-conformance-missing:"+run); !errors.Is(err, session.ErrImageMissing) {
		t.Errorf("Image of a missing reference: %v, want ErrImageMissing", err)
	}
	img, err := d.Image(ctx, image)
	if err != nil || img.ID == "" {
		t.Fatalf("Image(%s) = %+v, %v", image, img, err)
	}

	a, err := create(nameA, "a")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for _, ref := range []string{a, nameA} {
		c, err := d.Inspect(ctx, ref)
		if err != nil {
			t.Fatalf("Inspect(%s): %v", ref, err)
		}
		if c.ID != a || c.Name != nameA || c.Image != img.ID || !c.Running || c.Status != "running" ||
			c.Labels[labelRun] != run || c.Labels[labelPart] != "a" || time.Since(c.Created).Abs() > time.Minute {
			t.Errorf("Inspect(%s) = %+v, want the running container %s named %s from image %s with its labels, created now", ref, c, a, nameA, img.ID)
		}
	}
	b, err := create(nameB, "b")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}

	for _, tc := range []struct {
		labels map[string]string
		want   []string
	}{
		{map[string]string{labelRun: run}, []string{a, b}},
		{map[string]string{labelRun: run, labelPart: "a"}, []string{a}},
		{map[string]string{labelRun: run, labelPart: "c"}, nil},
		{map[string]string{labelRun: "other-" + run}, nil},
	} {
		list, err := d.List(ctx, tc.labels)
		if err != nil {
			t.Fatalf("List(%v): %v", tc.labels, err)
		}
		var got []string
		for _, c := range list {
			got = append(got, c.ID)
			if c.ID == a && (c.Name != nameA || c.Image != img.ID || !c.Running || c.Labels[labelPart] != "a") {
				t.Errorf("List(%v) describes %s as %+v", tc.labels, a, c)
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("List(%v) = %v, want %v", tc.labels, got, want)
		}
	}

	if _, err := create(nameA, "dup"); !errors.Is(err, session.ErrNameInUse) {
		t.Errorf("Create with a taken name: %v, want ErrNameInUse", err)
	}
	spec := conformanceSpec("agentbox-conformance-missing:"+run, "conformance-noimage-"+run, map[string]string{dockertest.LabelTest: t.Name(), labelRun: run})
	if id, err := d.Create(ctx, spec); !errors.Is(err, session.ErrImageMissing) {
		if err == nil {
			d.Remove(context.Background(), id)
		}
		t.Errorf("Create from a missing image: %v, want ErrImageMissing", err)
	}
	if list, _ := d.List(ctx, map[string]string{labelRun: run}); len(list) != 2 {
		t.Errorf("a refused Create left a container: %d containers, want 2", len(list))
	}

	renamed := "conformance-renamed-" + run
	if err := d.Rename(ctx, a, renamed); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	if c, err := d.Inspect(ctx, renamed); err != nil || c.ID != a || c.Name != renamed {
		t.Errorf("Inspect by the new name = %+v, %v", c, err)
	}
	if _, err := d.Inspect(ctx, nameA); !errors.Is(err, session.ErrContainerNotFound) {
		t.Errorf("Inspect by the old name: %v, want ErrContainerNotFound", err)
	}
	if err := d.Rename(ctx, a, nameB); !errors.Is(err, session.ErrNameInUse) {
		t.Errorf("Rename onto a taken name: %v, want ErrNameInUse", err)
	}

	missing := "conformance-missing-" + run
	if _, err := d.Inspect(ctx, missing); !errors.Is(err, session.ErrContainerNotFound) {
		t.Errorf("Inspect of a missing container: %v, want ErrContainerNotFound", err)
	}
	if err := d.Rename(ctx, missing, "conformance-other-"+run); !errors.Is(err, session.ErrContainerNotFound) {
		t.Errorf("Rename of a missing container: %v, want ErrContainerNotFound", err)
	}
	if _, err := d.Connect(ctx, missing); !errors.Is(err, session.ErrContainerNotFound) {
		t.Errorf("Connect to a missing container: %v, want ErrContainerNotFound", err)
	}

	c := conformanceDial(ctx, t, d, a)
	if h := c.Hello(); h.Protocol != kernel.ProtocolVersion {
		t.Errorf("hello %+v", h)
	}
	for _, step := range []struct{ code, want string }{{"x = 42", ""}, {"x", "42"}} {
		res, err := c.Execute(ctx, kernel.ExecRequest{Code: step.code}, nil)
		if err != nil {
			t.Fatalf("Execute(%q): %v", step.code, err)
		}
		var got string
		for _, o := range res.Outputs {
			got = o.Data["text/plain"]
		}
		if res.Error != nil || got != step.want {
			t.Errorf("Execute(%q) = %+v, want text/plain %q", step.code, res, step.want)
		}
	}
	if mr, ok := d.(interface {
		MemoryUsage(context.Context, string) (int64, error)
	}); ok {
		if n, err := mr.MemoryUsage(ctx, a); err != nil || n <= 0 {
			t.Errorf("MemoryUsage of a running container = %d, %v", n, err)
		}
	}

	if err := d.Remove(ctx, b); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	for _, ref := range []string{b, nameB} {
		if _, err := d.Inspect(ctx, ref); !errors.Is(err, session.ErrContainerNotFound) {
			t.Errorf("Inspect(%s) after Remove: %v, want ErrContainerNotFound", ref, err)
		}
	}
	if err := d.Remove(ctx, b); err != nil {
		t.Errorf("second Remove: %v, want none", err)
	}
	if list, _ := d.List(ctx, map[string]string{labelRun: run}); len(list) != 1 || list[0].ID != a {
		t.Errorf("List after Remove = %+v, want only %s", list, a)
	}
	// The stream ends with its container.
	if err := d.Remove(ctx, a); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		t.Errorf("the kernel stream outlived its container")
	}
}

// conformanceSpec is a container locked down like a session's.
func conformanceSpec(image, name string, labels map[string]string) session.Spec {
	return session.Spec{
		Name:       name,
		Image:      image,
		User:       sandboximage.InitUser,
		WorkingDir: "/",
		Labels:     maps.Clone(labels),
		Env:        []string{sandboximage.UserEnv + "=1000:1000", "AGENTBOX_MAX_OUTPUT=65536", "AGENTBOX_INTERRUPT_GRACE=2"},
		Tmpfs: map[string]string{
			"/tmp":     "rw,nosuid,nodev,size=64m,mode=1777",
			"/session": "rw,nosuid,nodev,size=64m,uid=1000,gid=1000,mode=0700",
		},
		Network:         "none",
		ReadOnlyRoot:    true,
		MemoryBytes:     256 << 20,
		NoSwap:          true,
		NanoCPUs:        1e9,
		PidsLimit:       128,
		CapDropAll:      true,
		CapAdd:          sandboximage.InitCapabilities(),
		NoNewPrivileges: true,
	}
}

// conformanceDial connects a kernel client to container id, retrying while
// the container's init starts.
func conformanceDial(ctx context.Context, t *testing.T, d session.Driver, id string) *kernel.Client {
	t.Helper()
	var last error
	for ctx.Err() == nil {
		var rw io.ReadWriteCloser
		if rw, last = d.Connect(ctx, id); last != nil {
			t.Fatalf("Connect: %v", last)
		}
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := kernel.NewClient(hctx, rw)
		cancel()
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return c
		}
		if errors.Is(err, kernel.ErrProtocolMismatch) {
			t.Fatalf("NewClient: %v", err)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("connect to the kernel: %v", last)
	return nil
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
