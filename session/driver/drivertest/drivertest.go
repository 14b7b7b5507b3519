// Package drivertest is the conformance suite of session/driver: what
// session.Manager relies on from a Driver (its errors, names, labels, and
// a kernel stream to the container's init). A new engine proves itself
// by passing it, as the Docker driver (internal/docker) and the
// in-memory one (session/sessiontest) do:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, drivertest.Config{Image: image}, func(t *testing.T) driver.Driver {
//			return newMyDriver(t)
//		})
//	}
package drivertest

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

	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
	"github.com/agentbox/agentbox/session/driver"
)

// Config is what the suite needs to know about the engine under test.
type Config struct {
	// Image is a current sandbox image the driver can create containers
	// from (one whose init and kernel speak kernel.ProtocolVersion).
	Image string
	// Labels are put on every container the suite creates, beside its
	// own (a harness's test label, so leftovers of a killed run can be
	// swept).
	Labels map[string]string
	// Timeout bounds the whole suite; 0 means 3 minutes.
	Timeout time.Duration
}

// The label keys the suite puts on its containers.
const (
	labelRun  = "io.agentbox.test.conformance-run"
	labelPart = "io.agentbox.test.conformance-part"
)

// Run checks the driver newDriver returns against the contract of
// driver.Driver (and of driver.MemoryReader when it has it), in subtests
// that run in order on two containers it creates and removes.
func Run(t *testing.T, cfg Config, newDriver func(t *testing.T) driver.Driver) {
	t.Helper()
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := newDriver(t)
	image := cfg.Image
	run := randomSuffix()
	labels := func(part string) map[string]string {
		l := maps.Clone(cfg.Labels)
		if l == nil {
			l = map[string]string{}
		}
		l[labelRun], l[labelPart] = run, part
		return l
	}
	// Containers live until Run ends, whichever subtest made them (a
	// second Remove is no error).
	top := t
	create := func(name, part string) (string, error) {
		id, err := d.Create(ctx, spec(image, name, labels(part)))
		if err == nil {
			top.Cleanup(func() {
				if err := d.Remove(context.Background(), id); err != nil {
					top.Errorf("remove %s: %v", id, err)
				}
			})
		}
		return id, err
	}
	nameA, nameB := "conformance-a-"+run, "conformance-b-"+run
	missing := "conformance-missing-" + run
	missingImage := "agentbox-conformance-missing:" + run

	var img driver.Image
	t.Run("Image", func(t *testing.T) {
		if _, err := d.Image(ctx, missingImage); !errors.Is(err, driver.ErrImageMissing) {
			t.Errorf("Image of a missing reference: %v, want ErrImageMissing", err)
		}
		var err error
		img, err = d.Image(ctx, image)
		if err != nil || img.ID == "" {
			t.Fatalf("Image(%s) = %+v, %v", image, img, err)
		}
	})
	if img.ID == "" {
		t.FailNow()
	}

	var a, b string
	t.Run("Create", func(t *testing.T) {
		var err error
		if a, err = create(nameA, "a"); err != nil {
			t.Fatalf("Create: %v", err)
		}
		if b, err = create(nameB, "b"); err != nil {
			t.Fatalf("Create: %v", err)
		}
	})
	if a == "" || b == "" {
		t.FailNow()
	}

	t.Run("Inspect", func(t *testing.T) {
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
	})

	t.Run("List", func(t *testing.T) {
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
	})

	t.Run("CreateRefused", func(t *testing.T) {
		if _, err := create(nameA, "dup"); !errors.Is(err, driver.ErrNameInUse) {
			t.Errorf("Create with a taken name: %v, want ErrNameInUse", err)
		}
		s := spec(missingImage, "conformance-noimage-"+run, labels("noimage"))
		if id, err := d.Create(ctx, s); !errors.Is(err, driver.ErrImageMissing) {
			if err == nil {
				d.Remove(context.Background(), id)
			}
			t.Errorf("Create from a missing image: %v, want ErrImageMissing", err)
		}
		if list, _ := d.List(ctx, map[string]string{labelRun: run}); len(list) != 2 {
			t.Errorf("a refused Create left a container: %d containers, want 2", len(list))
		}
	})

	t.Run("Rename", func(t *testing.T) {
		renamed := "conformance-renamed-" + run
		if err := d.Rename(ctx, a, renamed); err != nil {
			t.Fatalf("Rename: %v", err)
		}
		if c, err := d.Inspect(ctx, renamed); err != nil || c.ID != a || c.Name != renamed {
			t.Errorf("Inspect by the new name = %+v, %v", c, err)
		}
		if _, err := d.Inspect(ctx, nameA); !errors.Is(err, driver.ErrContainerNotFound) {
			t.Errorf("Inspect by the old name: %v, want ErrContainerNotFound", err)
		}
		if err := d.Rename(ctx, a, nameB); !errors.Is(err, driver.ErrNameInUse) {
			t.Errorf("Rename onto a taken name: %v, want ErrNameInUse", err)
		}
	})

	t.Run("Missing", func(t *testing.T) {
		if _, err := d.Inspect(ctx, missing); !errors.Is(err, driver.ErrContainerNotFound) {
			t.Errorf("Inspect of a missing container: %v, want ErrContainerNotFound", err)
		}
		if err := d.Rename(ctx, missing, "conformance-other-"+run); !errors.Is(err, driver.ErrContainerNotFound) {
			t.Errorf("Rename of a missing container: %v, want ErrContainerNotFound", err)
		}
		if _, err := d.Connect(ctx, missing); !errors.Is(err, driver.ErrContainerNotFound) {
			t.Errorf("Connect to a missing container: %v, want ErrContainerNotFound", err)
		}
	})

	var c *kernel.Client
	t.Run("Connect", func(t *testing.T) {
		// The client lives until Run ends: Remove checks that its stream
		// ends with its container.
		c = dial(ctx, t, d, a)
		top.Cleanup(func() { c.Close() })
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
	})

	if mr, ok := d.(driver.MemoryReader); ok {
		t.Run("MemoryUsage", func(t *testing.T) {
			if n, err := mr.MemoryUsage(ctx, a); err != nil || n <= 0 {
				t.Errorf("MemoryUsage of a running container = %d, %v", n, err)
			}
		})
	}

	t.Run("Remove", func(t *testing.T) {
		if err := d.Remove(ctx, b); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		for _, ref := range []string{b, nameB} {
			if _, err := d.Inspect(ctx, ref); !errors.Is(err, driver.ErrContainerNotFound) {
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
		if c == nil {
			return
		}
		select {
		case <-c.Done():
		case <-time.After(30 * time.Second):
			t.Errorf("the kernel stream outlived its container")
		}
	})
}

// spec is a container locked down like a session's, from image, with
// name and labels.
func spec(image, name string, labels map[string]string) driver.Spec {
	return driver.Spec{
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

// dial connects a kernel client to container id, retrying while the
// container's init starts.
func dial(ctx context.Context, t testing.TB, d driver.Driver, id string) *kernel.Client {
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
