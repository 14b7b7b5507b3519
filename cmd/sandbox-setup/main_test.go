package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

const bogusHost = "unix:///nonexistent/docker.sock"

// runSetup runs the command with args and an --env-file that does not exist,
// so that a stray .env in the working directory cannot interfere.
func runSetup(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args = append([]string{"--env-file", filepath.Join(t.TempDir(), "absent.env")}, args...)
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func suffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestPlainRunWithCurrentImageBuildsNothing(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	t.Setenv("SANDBOX_IMAGE", image)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := cli.InspectImage(ctx, image)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	code, stdout, stderr := runSetup(t)
	elapsed := time.Since(start)
	if code != exitOK {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, stdout, stderr)
	}
	for _, want := range []string{image + " is current", "nothing to do"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "building") {
		t.Errorf("stdout says it built something:\n%s", stdout)
	}
	if stderr != "" {
		t.Errorf("stderr not empty: %q", stderr)
	}
	after, err := cli.InspectImage(ctx, image)
	if err != nil {
		t.Fatal(err)
	}
	if after.ID != before.ID {
		t.Errorf("image ID changed from %s to %s", before.ID, after.ID)
	}
	t.Logf("no-op run took %s", elapsed.Round(time.Millisecond))
}

func TestCheck(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	stale := dockertest.StaleImage(t, "agentbox-test-stale")
	foreign := dockertest.ForeignImage(t, "agentbox-test-foreign")
	missing := "agentbox-test-missing:" + suffix(t)
	tests := []struct {
		name     string
		image    string
		wantCode int
		want     []string // regular expressions stdout must match
	}{
		{"current", image, exitOK, []string{
			`(?m)^ok\s+engine\s.*` + regexp.QuoteMeta(cli.Host()),
			`(?m)^ok\s+image\s+` + regexp.QuoteMeta(image) + ` is current`,
			`(?m)^ok\s+security\s`,
			`(?m)^ok\s+seccomp\s+agentbox's profile \(SANDBOX_SECCOMP=default\): the engine's default without \d+ syscalls`,
			`(?m)^ok\s+seccomp\s+in a sandbox: io_uring_setup refused \(EPERM\)`,
			`all checks passed`,
		}},
		{"stale", stale, exitProblem, []string{
			`(?m)^ok\s+engine\s`,
			`(?m)^FAIL\s+image\s+` + regexp.QuoteMeta(stale) + ` is stale`,
			`(?m)^\s+fix: run sandbox-setup`,
			`problem\(s\) found`,
		}},
		{"foreign", foreign, exitProblem, []string{ // issue 24 row 11
			`(?m)^FAIL\s+image\s+` + regexp.QuoteMeta(foreign) + ` is not an agentbox sandbox image \(no label io\.agentbox\.protocol\)`,
			`(?m)^\s+fix: .*derive one from agentbox-sandbox:latest`,
		}},
		{"missing", missing, exitProblem, []string{
			`(?m)^ok\s+engine\s`,
			`(?m)^FAIL\s+image\s+` + regexp.QuoteMeta(missing) + ` is missing`,
			`(?m)^\s+fix: run sandbox-setup`,
			`problem\(s\) found`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSetup(t, "--check", "--image", tt.image)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			for _, re := range tt.want {
				if !regexp.MustCompile(re).MatchString(stdout) {
					t.Errorf("stdout does not match %s", re)
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
		})
	}
}

// TestNoEngine needs no engine: it points DOCKER_HOST at a socket that does
// not exist.
func TestNoEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", bogusHost)
	for _, args := range [][]string{nil, {"--check"}} {
		t.Run(strings.Join(append([]string{"run"}, args...), " "), func(t *testing.T) {
			code, stdout, stderr := runSetup(t, args...)
			if code != exitNoEngine {
				t.Errorf("exit code %d, want %d", code, exitNoEngine)
			}
			if n := strings.Count(stderr, "\n"); n != 1 || !strings.HasSuffix(stderr, "\n") {
				t.Errorf("stderr has %d lines, want exactly one:\n%s", n, stderr)
			}
			for _, want := range []string{bogusHost, "start it", "systemctl start docker", "DOCKER_HOST"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q: %q", want, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout not empty: %q", stdout)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string // on stderr
	}{
		{"unknown flag", nil, []string{"--no-such-flag"}, "no-such-flag"},
		{"stray argument", nil, []string{"build"}, `unexpected argument "build"`},
		{"bad SESSION_STORAGE", map[string]string{"SESSION_STORAGE": "RAM"}, nil, `SESSION_STORAGE="RAM": want TMPFS or BIND`},
		{"bad SESSION_STORAGE with --check", map[string]string{"SESSION_STORAGE": "RAM"}, []string{"--check"}, "SESSION_STORAGE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A configuration error must win before any engine is asked.
			t.Setenv("DOCKER_HOST", bogusHost)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := runSetup(t, tt.args...)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUsage, stdout, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	code, _, stderr := runSetup(t, "--help")
	if code != exitOK {
		t.Errorf("--help: exit code %d, want %d", code, exitOK)
	}
	for _, want := range []string{"usage: sandbox-setup", "-check", "-no-pull", "-debootstrap"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("--help output lacks %q:\n%s", want, stderr)
		}
	}
}

// TestCheckSeccomp runs --check under each SANDBOX_SECCOMP setting: it names
// the profile in force and says what a sandbox observed.
func TestCheckSeccomp(t *testing.T) {
	dockertest.Engine(t)
	image := dockertest.Image(t)
	profile := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(profile, sandboximage.SeccompProfile(), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      map[string]string
		wantCode int
		want     []string // regular expressions stdout must match
	}{
		{"engine", map[string]string{"SANDBOX_SECCOMP": "engine"}, exitOK, []string{
			`(?m)^(ok|warn)\s+seccomp\s+the engine's own default profile \(SANDBOX_SECCOMP=engine\)`,
			`(?m)^(ok|warn)\s+seccomp\s+in a sandbox: io_uring_setup (allowed|refused)`,
		}},
		{"unconfined", map[string]string{"SANDBOX_SECCOMP": "unconfined", "SANDBOX_ALLOW_UNCONFINED": "true"}, exitOK, []string{
			`(?m)^warn\s+seccomp\s+no seccomp filter \(SANDBOX_SECCOMP=unconfined\)`,
			`(?m)^\s+fix: unset SANDBOX_SECCOMP`,
		}},
		{"file", map[string]string{"SANDBOX_SECCOMP": profile}, exitOK, []string{
			`(?m)^ok\s+seccomp\s+profile file ` + regexp.QuoteMeta(profile) + ` \(SANDBOX_SECCOMP, \d+ bytes, sha256 [0-9a-f]{12}, the same as agentbox's\)`,
			`(?m)^ok\s+seccomp\s+in a sandbox: io_uring_setup refused \(EPERM\)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SANDBOX_IMAGE", image)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := runSetup(t, "--check")
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			for _, re := range tt.want {
				if !regexp.MustCompile(re).MatchString(stdout) {
					t.Errorf("stdout does not match %s", re)
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
		})
	}
}

// TestCheckSeccompUnderGVisor: runsc does not apply the engine's seccomp
// profile unless it runs with --oci-seccomp; --check must say which is the
// case here rather than claim the profile holds.
func TestCheckSeccompUnderGVisor(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(info.Runtimes, "runsc") {
		t.Skipf("no runsc runtime on this engine (it has %v)", info.Runtimes)
	}
	t.Setenv("SANDBOX_IMAGE", image)
	t.Setenv("SANDBOX_RUNTIME", "runsc")
	_, stdout, stderr := runSetup(t, "--check")
	applied := regexp.MustCompile(`(?m)^ok\s+seccomp\s+in a sandbox \(gVisor\): runsc applies the profile \(--oci-seccomp\)`)
	ignored := regexp.MustCompile(`(?m)^warn\s+seccomp\s+in a sandbox \(gVisor\): runsc does not apply the profile \(it runs without --oci-seccomp\); gVisor serves syscalls itself, and io_uring_setup is (allowed|refused)`)
	if !applied.MatchString(stdout) && !ignored.MatchString(stdout) {
		t.Errorf("--check does not say whether gVisor applies the profile\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	t.Logf("stdout:\n%s", stdout)
}
