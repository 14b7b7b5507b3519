// Package dockertest is the test harness for packages whose behaviour depends
// on the Docker engine. Tests call Engine (or Image) first: it really pings the
// engine and skips the test with the reason when none answers, or fails it when
// AGENTBOX_REQUIRE_DOCKER=1 (as CI sets), so a missing engine can never pass
// silently in CI. Image makes sure the current sandbox image exists, once per
// test binary. Every container a test starts carries LabelTest and is removed
// by the test's cleanup; Sweep removes leftovers of killed test runs.
package dockertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// LabelTest marks containers started by tests.
const LabelTest = "io.agentbox.test"

// RequireEnv is the variable that turns a missing engine from a skip into a failure.
const RequireEnv = "AGENTBOX_REQUIRE_DOCKER"

// RuntimeEnv names the OCI runtime test containers run under (for example
// runsc, for gVisor); unset or empty means the engine's default.
const RuntimeEnv = "AGENTBOX_TEST_RUNTIME"

var (
	engineOnce sync.Once
	engineCli  *docker.Client
	engineErr  error

	imageOnce sync.Once
	imageErr  error

	runtimeOnce sync.Once
	runtimeErr  error
)

// ImageName is the sandbox image tests use: SANDBOX_IMAGE or the default.
func ImageName() string {
	if v := os.Getenv("SANDBOX_IMAGE"); v != "" {
		return v
	}
	return "agentbox-sandbox:latest"
}

// Engine returns a client of a reachable engine, or skips (fails under
// AGENTBOX_REQUIRE_DOCKER=1) the test.
func Engine(t testing.TB) *docker.Client {
	t.Helper()
	engineOnce.Do(func() {
		engineCli, engineErr = docker.New()
		if engineErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, engineErr = engineCli.Info(ctx)
	})
	if engineErr != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("Docker engine required (%s=1) but not usable: %v", RequireEnv, engineErr)
		}
		t.Skipf("no Docker engine: %v (set %s=1 to make this a failure)", engineErr, RequireEnv)
	}
	return engineCli
}

// Image returns the name of the current sandbox image, building it first if
// it is missing or stale (once per test binary; test binaries running at the
// same time take turns through a file lock).
func Image(t testing.TB) string {
	t.Helper()
	cli := Engine(t)
	imageOnce.Do(func() {
		// Bounded, lock included: another test binary may hold the lock
		// for as long as its build takes on a loaded machine; this test
		// fails saying so before go test's own timeout kills it blind.
		ctx, cancel := Bound(t, 20*time.Minute)
		defer cancel()
		unlock, err := lock(ctx, filepath.Join(os.TempDir(), "agentbox-test-image.lock"))
		if err != nil {
			imageErr = err
			return
		}
		defer unlock()
		if _, err := imagesetup.Ensure(ctx, cli, imagesetup.Options{Image: ImageName(), Out: testLog{}}); err != nil {
			imageErr = fmt.Errorf("build or check it (bounded by the test's deadline): %w", err)
		}
	})
	if imageErr != nil {
		t.Fatalf("sandbox image %s: %v", ImageName(), imageErr)
	}
	return ImageName()
}

// Runtime returns the OCI runtime tests run sandboxes under (RuntimeEnv; ""
// for the engine's default), after checking that the engine knows it: a
// runtime the engine lacks skips the test, or fails it under
// AGENTBOX_REQUIRE_DOCKER=1, rather than passing under another runtime.
func Runtime(t testing.TB) string {
	t.Helper()
	name := os.Getenv(RuntimeEnv)
	if name == "" {
		return ""
	}
	cli := Engine(t)
	runtimeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		info, err := cli.Info(ctx)
		if err != nil {
			runtimeErr = err
			return
		}
		if !slices.Contains(info.Runtimes, name) {
			runtimeErr = fmt.Errorf("the engine has no runtime %q (it has %s): install it and register it in /etc/docker/daemon.json, as .ci/run does", name, strings.Join(info.Runtimes, ", "))
		}
	})
	if runtimeErr != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s=%s: %v", RuntimeEnv, name, runtimeErr)
		}
		t.Skipf("%s=%s: %v (set %s=1 to make this a failure)", RuntimeEnv, name, runtimeErr, RequireEnv)
	}
	return name
}

// HasRuntime reports whether the engine knows the OCI runtime name, for
// benchmarks that compare runtimes side by side when they can.
func HasRuntime(t testing.TB, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := Engine(t).Info(ctx)
	return err == nil && slices.Contains(info.Runtimes, name)
}

// IsGVisor reports whether tests run sandboxes under gVisor (runsc), for the
// few tests whose expectations differ there (see the README's gVisor notes).
func IsGVisor() bool { return strings.HasPrefix(os.Getenv(RuntimeEnv), "runsc") }

type testLog struct{}

func (testLog) Write(p []byte) (int, error) { return os.Stderr.Write(p) }

// Bound returns a context that ends after d, or 30 s before the test's
// deadline (go test -timeout) if that comes first: a wait that would
// outlast the test fails it with its own message instead.
func Bound(t testing.TB, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := dl.Deadline(); ok {
			d = min(d, time.Until(end)-30*time.Second)
		}
	}
	return context.WithTimeout(context.Background(), max(d, time.Second))
}

// lock takes the exclusive lock on path, waiting for it until ctx ends.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image lock: %w", err)
	}
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("image lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("image lock %s: another test process held it for %s (building the image on a loaded machine?): %w",
				path, time.Since(start).Round(time.Second), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// Sandbox starts a sandbox container in the locked-down shape sessions use,
// after applying edit (may be nil), and removes it when the test ends.
func Sandbox(t testing.TB, edit func(*docker.ContainerSpec)) string {
	t.Helper()
	cli := Engine(t)
	spec := imagesetup.LockedDown(Image(t))
	spec.Labels = map[string]string{LabelTest: t.Name()}
	spec.Env = append(spec.Env, "AGENTBOX_INTERRUPT_GRACE=2")
	spec.Runtime = Runtime(t)
	if edit != nil {
		edit(&spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := cli.CreateContainer(ctx, spec)
	if err != nil {
		t.Fatalf("start sandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cli.RemoveContainer(ctx, id); err != nil {
			t.Errorf("remove sandbox: %v", err)
		}
	})
	return id
}

// Dial opens a kernel client to the sandbox container id through a bridge
// process (`docker exec -i`), retrying while the init starts.
func Dial(t testing.TB, id string) *kernel.Client {
	t.Helper()
	cli := Engine(t)
	c, err := DialErr(context.Background(), cli, id)
	if err != nil {
		t.Fatalf("connect to the kernel: %v%s", err, postMortem(cli, id))
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// postMortem describes a container a test could not use: its state and
// the end of what it printed, so that a rare failure explains itself.
func postMortem(cli *docker.Client, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := cli.InspectContainer(ctx, id)
	if err != nil {
		return fmt.Sprintf(" (inspect: %v)", err)
	}
	out, errOut, _ := cli.Logs(ctx, id)
	tail := func(s string) string {
		if len(s) > 2000 {
			s = "…" + s[len(s)-2000:]
		}
		return s
	}
	return fmt.Sprintf(" (container %s: status %s, exit code %d, OOM-killed %v; stdout %q; stderr %q)",
		st.ID[:12], st.Status, st.ExitCode, st.OOMKilled, tail(out), tail(errOut))
}

// DialErr is Dial for callers that handle the error.
func DialErr(ctx context.Context, cli *docker.Client, id string) (*kernel.Client, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := cli.Exec(ctx, id, sandboximage.BridgeUser, sandboximage.BridgeCommand())
		if err != nil {
			return nil, err
		}
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := kernel.NewClient(hctx, s)
		cancel()
		if err == nil {
			return c, nil
		}
		var verr *kernel.VersionError
		if errors.As(err, &verr) || time.Now().After(deadline) {
			return nil, fmt.Errorf("%w (bridge said: %s)", err, s.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Sweep removes every container a test run left behind: those carrying
// LabelTest and, when given, every one of labels ("key=value" or "key"), so
// that a test can sweep its own leftovers without removing the containers of
// test binaries running at the same time.
func Sweep(ctx context.Context, cli *docker.Client, labels ...string) error {
	list, err := cli.ListContainers(ctx, append([]string{LabelTest}, labels...)...)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range list {
		errs = append(errs, cli.RemoveContainer(ctx, c.ID))
	}
	return errors.Join(errs...)
}

// ForkTrue is Python that defines _fork_true() in a kernel: the seconds a
// fork and exec of /bin/true take there, to its exit (the in-container
// floor benchmarks compare a command with).
const ForkTrue = `
import os as _os, time as _time
def _fork_true():
    t = _time.perf_counter()
    pid = _os.fork()
    if pid == 0:
        try:
            _os.execv("/bin/true", ["true"])
        finally:
            _os._exit(127)
    _os.waitpid(pid, 0)
    return _time.perf_counter() - t
`
