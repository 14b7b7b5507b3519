package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
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
			`all checks passed`,
		}},
		{"stale", stale, exitProblem, []string{
			`(?m)^ok\s+engine\s`,
			`(?m)^FAIL\s+image\s+` + regexp.QuoteMeta(stale) + ` is stale`,
			`(?m)^\s+fix: run sandbox-setup`,
			`problem\(s\) found`,
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
