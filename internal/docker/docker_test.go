package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
)

const bogusHost = "unix:///nonexistent/docker.sock"

func suffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func timeout(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestNotFound(t *testing.T) {
	cli := dockertest.Engine(t)
	ctx := timeout(t)
	missingImage := "agentbox-test-missing:" + suffix(t)
	missingContainer := "agentbox-test-missing-" + suffix(t)
	tests := []struct {
		name string
		call func() error
	}{
		{"inspect image", func() error { _, err := cli.InspectImage(ctx, missingImage); return err }},
		{"inspect container", func() error { _, err := cli.InspectContainer(ctx, missingContainer); return err }},
		{"kill container", func() error { return cli.KillContainer(ctx, missingContainer, "KILL") }},
		{"exec in container", func() error { _, err := cli.Exec(ctx, missingContainer, "", []string{"true"}); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, docker.ErrNotFound) {
				t.Fatalf("err = %v, want errors.Is(err, ErrNotFound)", err)
			}
			if errors.Is(err, docker.ErrUnreachable) {
				t.Fatalf("err = %v is also ErrUnreachable", err)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	t.Setenv("DOCKER_HOST", bogusHost)
	cli, err := docker.New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	if got := cli.Host(); got != bogusHost {
		t.Fatalf("Host() = %q, want %q", got, bogusHost)
	}
	ctx := timeout(t)
	tests := []struct {
		name string
		call func() error
	}{
		{"info", func() error { _, err := cli.Info(ctx); return err }},
		{"inspect image", func() error { _, err := cli.InspectImage(ctx, "agentbox-sandbox:latest"); return err }},
		{"inspect container", func() error { _, err := cli.InspectContainer(ctx, "whatever"); return err }},
		{"list containers", func() error { _, err := cli.ListContainers(ctx, dockertest.LabelTest); return err }},
		{"create container", func() error {
			_, err := cli.CreateContainer(ctx, imagesetup.LockedDown("agentbox-sandbox:latest"))
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ue *docker.UnreachableError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v (%T), want an *UnreachableError", err, err)
			}
			if ue.Host != bogusHost {
				t.Errorf("UnreachableError.Host = %q, want %q", ue.Host, bogusHost)
			}
			if !errors.Is(err, docker.ErrUnreachable) {
				t.Errorf("errors.Is(%v, ErrUnreachable) = false", err)
			}
			if errors.Is(err, docker.ErrNotFound) {
				t.Errorf("err = %v is also ErrNotFound", err)
			}
			msg := err.Error()
			for _, want := range []string{bogusHost, "start it", "DOCKER_HOST"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
		})
	}
}

func TestCreateContainerMissingImage(t *testing.T) {
	cli := dockertest.Engine(t)
	ctx := timeout(t)
	image := "agentbox-test-missing:" + suffix(t)
	spec := imagesetup.LockedDown(image)
	spec.Labels = map[string]string{dockertest.LabelTest: t.Name()}
	id, err := cli.CreateContainer(ctx, spec)
	if err == nil {
		t.Cleanup(func() { _ = cli.RemoveContainer(context.Background(), id) })
		t.Fatalf("CreateContainer from missing image %s succeeded (container %s)", image, id)
	}
	if !strings.Contains(err.Error(), image) {
		t.Errorf("error %q does not name the image %s", err, image)
	}
	if !errors.Is(err, docker.ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrNotFound) = false", err)
	}
	// Nothing may be left behind.
	list, err := cli.ListContainers(ctx, dockertest.LabelTest+"="+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("containers left behind: %+v", list)
	}
}

func TestRemoveContainerTwice(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	ctx := timeout(t)
	spec := imagesetup.LockedDown(image)
	spec.Labels = map[string]string{dockertest.LabelTest: t.Name()}
	spec.Entrypoint = []string{"sleep", "600"}
	id, err := cli.CreateContainer(ctx, spec)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	t.Cleanup(func() { _ = cli.RemoveContainer(context.Background(), id) })

	st, err := cli.InspectContainer(ctx, id)
	if err != nil {
		t.Fatalf("InspectContainer: %v", err)
	}
	if !st.Running {
		t.Fatalf("container not running after CreateContainer: %+v", st)
	}
	if st.Labels[dockertest.LabelTest] != t.Name() {
		t.Errorf("labels = %v, want %s=%s", st.Labels, dockertest.LabelTest, t.Name())
	}
	for i := range 2 {
		if err := cli.RemoveContainer(ctx, id); err != nil {
			t.Fatalf("RemoveContainer #%d: %v", i+1, err)
		}
	}
	if _, err := cli.InspectContainer(ctx, id); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("InspectContainer after removal: err = %v, want ErrNotFound", err)
	}
	if err := cli.RemoveContainer(ctx, "agentbox-test-never-"+suffix(t)); err != nil {
		t.Fatalf("RemoveContainer of a container that never existed: %v", err)
	}
}

// TestRemoveContainerConcurrently: removers racing on one container (two
// processes evicting the same session, say) all succeed, and none returns
// before the container is gone: a caller that looks right after must not
// find it dead and take that for a new loss. Before, the losers failed
// with "removal of container ... is already in progress", or returned
// while the engine still showed it, exited 137.
func TestRemoveContainerConcurrently(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	ctx := timeout(t)
	for round := range 5 {
		spec := imagesetup.LockedDown(image)
		spec.Labels = map[string]string{dockertest.LabelTest: t.Name()}
		spec.Entrypoint = []string{"sleep", "600"}
		id, err := cli.CreateContainer(ctx, spec)
		if err != nil {
			t.Fatalf("CreateContainer: %v", err)
		}
		t.Cleanup(func() { _ = cli.RemoveContainer(context.Background(), id) })
		errs := make(chan error, 4)
		for range cap(errs) {
			go func() {
				err := cli.RemoveContainer(ctx, id)
				if err == nil {
					if st, ierr := cli.InspectContainer(ctx, id); !errors.Is(ierr, docker.ErrNotFound) {
						err = fmt.Errorf("returned while the engine still shows it: %+v, %v", st, ierr)
					}
				}
				errs <- err
			}()
		}
		for i := range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d, remover %d: %v", round, i+1, err)
			}
		}
	}
}
