package sessiontest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	d := sessiontest.NewDriver()
	id := newContainer(t, d)
	c := dial(t, d, id)
	d.SetUnavailable(true)
	calls := map[string]error{}
	_, calls["Image"] = d.Image(ctx, sessiontest.SandboxImage)
	_, calls["Create"] = d.Create(ctx, session.Spec{Image: sessiontest.SandboxImage})
	_, calls["Connect"] = d.Connect(ctx, id)
	_, calls["Inspect"] = d.Inspect(ctx, id)
	_, calls["List"] = d.List(ctx, nil)
	calls["Rename"] = d.Rename(ctx, id, "other")
	calls["Remove"] = d.Remove(ctx, id)
	_, calls["MemoryUsage"] = d.MemoryUsage(ctx, id)
	for name, err := range calls {
		if !errors.Is(err, session.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
	}
	// Streams already open keep working.
	if res := execute(t, c, "", "1"); plainOf(res) != "1" {
		t.Fatalf("open stream: %+v", res)
	}
	d.SetUnavailable(false)
	if _, err := d.Inspect(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func TestFailNextCreate(t *testing.T) {
	ctx := context.Background()
	d := sessiontest.NewDriver()
	boom := errors.New("boom")
	d.FailNextCreate(boom)
	if _, err := d.Create(ctx, session.Spec{Image: sessiontest.SandboxImage}); !errors.Is(err, boom) {
		t.Fatalf("first create: %v, want boom", err)
	}
	if _, err := d.Create(ctx, session.Spec{Image: sessiontest.SandboxImage}); err != nil {
		t.Fatalf("second create: %v", err)
	}
	if _, err := d.Create(ctx, session.Spec{Image: "missing:1"}); !errors.Is(err, session.ErrImageMissing) {
		t.Fatalf("create from a missing image: %v, want ErrImageMissing", err)
	}
	if n := d.Created(); n != 1 {
		t.Fatalf("Created() = %d, want 1", n)
	}
}

func TestImages(t *testing.T) {
	ctx := context.Background()
	d := sessiontest.NewDriver()
	id := d.AddImage("other:1", map[string]string{"a": "b"})
	img, err := d.Image(ctx, "other:1")
	if err != nil || img.ID != id || img.Labels["a"] != "b" {
		t.Fatalf("image: %+v, %v", img, err)
	}
	cid, err := d.Create(ctx, session.Spec{Image: "other:1"})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := d.Inspect(ctx, cid); c.Image != id {
		t.Fatalf("container image %s, want the image ID %s", c.Image, id)
	}
}

func TestPeak(t *testing.T) {
	ctx := context.Background()
	d := sessiontest.NewDriver()
	spec := func(name, role string) session.Spec {
		return session.Spec{Name: name, Image: sessiontest.SandboxImage, Labels: map[string]string{"role": role}}
	}
	pool := func(c session.Container) bool { return c.Labels["role"] == "pool" }
	create := func(name, role string) string {
		id, err := d.Create(ctx, spec(name, role))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	a := create("c1", "pool")
	b := create("c2", "pool")
	create("c3", "session")
	d.Remove(ctx, a)
	create("c4", "pool")
	d.Kill(b) // a stopped container still exists
	if got := d.Peak(pool); got != 2 {
		t.Fatalf("Peak = %d, want 2", got)
	}
	create("c5", "pool")
	if got := d.Peak(pool); got != 3 {
		t.Fatalf("Peak = %d, want 3", got)
	}
	if n := len(d.Containers()); n != 4 {
		t.Fatalf("%d containers, want 4", n)
	}
}
