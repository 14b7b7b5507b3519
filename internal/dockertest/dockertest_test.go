package dockertest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/kernel"
)

// helperEnv marks the child process in which TestHelperEngine does its work.
const helperEnv = "AGENTBOX_DOCKERTEST_HELPER"

func suffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestHelperEngine only calls Engine, in the child processes that
// TestEngineSkipsOrFails starts.
func TestHelperEngine(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper of TestEngineSkipsOrFails")
	}
	dockertest.Engine(t)
	t.Log("engine reachable")
}

// TestEngineSkipsOrFails runs this test binary again with no reachable engine:
// Engine must skip the test, or fail it when AGENTBOX_REQUIRE_DOCKER=1.
func TestEngineSkipsOrFails(t *testing.T) {
	const bogusHost = "unix:///nonexistent/docker.sock"
	tests := []struct {
		name     string
		require  bool
		wantPass bool
		want     []string
	}{
		{"skips without the variable", false, true, []string{"--- SKIP: TestHelperEngine", "no Docker engine", bogusHost, "PASS"}},
		{"fails with the variable", true, false, []string{"--- FAIL: TestHelperEngine", dockertest.RequireEnv + "=1", bogusHost}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperEngine$", "-test.v", "-test.count=1")
			var env []string
			for _, kv := range os.Environ() {
				name, _, _ := strings.Cut(kv, "=")
				if name != dockertest.RequireEnv && name != "DOCKER_HOST" && name != "DOCKER_CONTEXT" && name != helperEnv {
					env = append(env, kv)
				}
			}
			env = append(env, helperEnv+"=1", "DOCKER_HOST="+bogusHost)
			if tt.require {
				env = append(env, dockertest.RequireEnv+"=1")
			}
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			var exitErr *exec.ExitError
			switch {
			case tt.wantPass && err != nil:
				t.Errorf("child failed (%v), want exit 0", err)
			case !tt.wantPass && !errors.As(err, &exitErr):
				t.Errorf("child: err = %v, want a non-zero exit", err)
			}
			for _, want := range tt.want {
				if !strings.Contains(string(out), want) {
					t.Errorf("child output lacks %q", want)
				}
			}
			if t.Failed() {
				t.Logf("child output:\n%s", out)
			}
		})
	}
}

func TestSandboxAndDial(t *testing.T) {
	id := dockertest.Sandbox(t, nil)
	c := dockertest.Dial(t, id)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: "print(1+1)"}, nil)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if res.Error != nil {
		t.Fatalf("Python error: %+v", res.Error)
	}
	if res.Stdout != "2\n" {
		t.Fatalf("stdout = %q, want %q", res.Stdout, "2\n")
	}

	st, err := dockertest.Engine(t).InspectContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Labels[dockertest.LabelTest] != t.Name() {
		t.Errorf("sandbox labels = %v, want %s=%s", st.Labels, dockertest.LabelTest, t.Name())
	}
}

func TestSweep(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Two leftovers of "killed runs"; the sweep is narrowed to the first so
	// that it cannot remove the containers of test binaries running now.
	start := func(value string) string {
		spec := imagesetup.LockedDown(image)
		spec.Entrypoint = []string{"sleep", "600"}
		spec.Labels = map[string]string{dockertest.LabelTest: value}
		id, err := cli.CreateContainer(ctx, spec)
		if err != nil {
			t.Fatalf("create leftover: %v", err)
		}
		t.Cleanup(func() { _ = cli.RemoveContainer(context.Background(), id) })
		return id
	}
	run := "sweep-" + suffix(t)
	leftover := start(run)
	other := start("other-" + suffix(t))

	if err := dockertest.Sweep(ctx, cli, dockertest.LabelTest+"="+run); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if _, err := cli.InspectContainer(ctx, leftover); !errors.Is(err, docker.ErrNotFound) {
		t.Errorf("leftover after Sweep: err = %v, want ErrNotFound", err)
	}
	if st, err := cli.InspectContainer(ctx, other); err != nil || !st.Running {
		t.Errorf("container outside the sweep: %+v, %v; want it running", st, err)
	}
	if err := dockertest.Sweep(ctx, cli, dockertest.LabelTest+"="+run); err != nil {
		t.Errorf("second Sweep (nothing left): %v", err)
	}
}
