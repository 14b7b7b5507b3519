package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
)

// outcome is what one in-process invocation did.
type outcome struct {
	code           int
	stdout, stderr string
}

// agentbox runs the command in-process with stdin as its input. Each call
// makes its own manager, as a separate invocation of the program would.
func agentbox(t *testing.T, stdin string, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	code := run(ctx, args, strings.NewReader(stdin), &stdout, &stderr)
	return outcome{code, stdout.String(), stderr.String()}
}

// sandboxEnv configures the command, through the environment as an operator
// would, to use the current image, keep its files under a temporary folder
// and run in a namespace of its own; the namespace's sessions are stopped
// when the test ends.
func sandboxEnv(t *testing.T) {
	t.Helper()
	image := dockertest.Image(t)
	dir := t.TempDir()
	t.Chdir(dir) // no stray .env is read, nothing is written elsewhere
	var b [4]byte
	_, _ = rand.Read(b[:])
	for k, v := range map[string]string{
		namespaceEnv:        "t-" + hex.EncodeToString(b[:]),
		"SANDBOX_IMAGE":     image,
		"ARTIFACTS_DB":      filepath.Join(dir, "artifacts.db"),
		"SESSIONS_ROOT":     filepath.Join(dir, "sessions"),
		"BLOBSTORE_DIR":     filepath.Join(dir, "blobstore"),
		"SESSION_STORAGE":   "TMPFS",
		"TMPFS_SIZE_MB":     "64",
		"INTERRUPT_GRACE_S": "2",
		"POOL_SIZE":         "4", // the command must ignore it
	} {
		t.Setenv(k, v)
	}
	t.Cleanup(func() {
		if r := agentbox(t, "", "stop", "--all"); r.code != exitOK {
			t.Errorf("stop --all: exit %d: %s", r.code, r.stderr)
		}
	})
}

// oneErrorLine checks that stderr is one line saying what went wrong.
func oneErrorLine(t *testing.T, stderr string) {
	t.Helper()
	if !strings.HasPrefix(stderr, "agentbox: ") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one line starting with %q", stderr, "agentbox: ")
	}
}

// TestUsageErrors covers the command lines refused before any sandbox is
// touched: none of them needs the engine.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string // in stderr
	}{
		{"unknown command", "", []string{"bogus"}, `unknown command "bogus"`},
		{"flag before command", "", []string{"--json", "ls"}, "before a command"},
		{"bad exec flag", "", []string{"exec", "--nope", "1"}, "-nope"},
		{"bad timeout", "", []string{"exec", "--timeout", "soon", "1"}, "timeout"},
		{"negative timeout", "", []string{"exec", "--timeout", "-1s", "1"}, "more than 0"},
		{"empty code", "", []string{"exec", "  "}, "no code"},
		{"empty stdin", " \n", []string{"exec", "-"}, "no code"},
		{"no code at all", "", []string{"exec"}, "no code"},
		{"two code arguments", "", []string{"exec", "print(1)", "print(2)"}, "one CODE argument"},
		{"repl argument", "", []string{"repl", "x"}, "unexpected argument"},
		{"ls argument", "", []string{"ls", "x"}, "unexpected argument"},
		{"stop nothing", "", []string{"stop"}, "KEY"},
		{"stop key and all", "", []string{"stop", "--all", "k"}, "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := agentbox(t, tt.stdin, tt.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %q", r.code, exitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q does not mention %q", r.stderr, tt.want)
			}
			oneErrorLine(t, r.stderr)
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

func TestNoArgumentsPrintsUsage(t *testing.T) {
	r := agentbox(t, "")
	if r.code != exitUsage || !strings.Contains(r.stderr, "usage: agentbox") {
		t.Errorf("exit %d, stderr %q: want %d and the usage", r.code, r.stderr, exitUsage)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := agentbox(t, "", args...)
		if r.code != exitOK {
			t.Errorf("%v: exit %d", args, r.code)
		}
		for _, want := range []string{"exec", "repl", "ls", "stop", "--timeout", "exit status", "SANDBOX_IMAGE", "sandbox-setup"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v: help does not mention %q", args, want)
			}
		}
	}
}

func TestConfigurationError(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("EXEC_TIMEOUT_S", "soon")
	r := agentbox(t, "", "exec", "1")
	if r.code != exitUsage {
		t.Errorf("exit %d, want %d", r.code, exitUsage)
	}
	if !strings.Contains(r.stderr, "EXEC_TIMEOUT_S") {
		t.Errorf("stderr %q does not name the variable", r.stderr)
	}
	oneErrorLine(t, r.stderr)
}

func TestMissingImage(t *testing.T) {
	dockertest.Engine(t)
	t.Chdir(t.TempDir())
	t.Setenv(namespaceEnv, "t-missing-image")
	t.Setenv("ARTIFACTS_DB", filepath.Join(t.TempDir(), "artifacts.db"))
	t.Setenv("SESSIONS_ROOT", filepath.Join(t.TempDir(), "sessions"))
	t.Setenv("SANDBOX_IMAGE", "agentbox-missing:none")
	r := agentbox(t, "", "exec", "print(1)")
	if r.code != exitSandbox {
		t.Errorf("exit %d, want %d", r.code, exitSandbox)
	}
	if !strings.Contains(r.stderr, "sandbox-setup") || !strings.Contains(r.stderr, "agentbox-missing:none") {
		t.Errorf("stderr %q should name the image and sandbox-setup", r.stderr)
	}
	oneErrorLine(t, r.stderr)
}

func TestEngineUnreachable(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	t.Setenv("ARTIFACTS_DB", filepath.Join(t.TempDir(), "artifacts.db"))
	r := agentbox(t, "", "ls")
	if r.code != exitSandbox {
		t.Errorf("exit %d, want %d; stderr %q", r.code, exitSandbox, r.stderr)
	}
	oneErrorLine(t, r.stderr)
}
