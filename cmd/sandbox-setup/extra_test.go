package main

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
)

func TestBaseTag(t *testing.T) {
	for in, want := range map[string]string{
		"agentbox-sandbox:latest":   "agentbox-sandbox:latest-base",
		"agentbox-sandbox":          "agentbox-sandbox:latest-base",
		"localhost:5000/sandbox":    "localhost:5000/sandbox:latest-base",
		"localhost:5000/sandbox:v1": "localhost:5000/sandbox:v1-base",
		"sandbox@sha256:" + "ab":    "",
	} {
		if got := BaseTag(in); got != want {
			t.Errorf("BaseTag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBadExtraPackageIsAUsageError(t *testing.T) {
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"--env-file", "/nonexistent", "--extra-packages", "python3-ok,Bad_Name"}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), `"Bad_Name" is not a Debian package name`) {
		t.Errorf("exit %d, stderr %q; want %d naming the bad package", code, stderr.String(), exitUsage)
	}
}

// TestExtraPackagesOnTheEngine: --extra-packages builds the derived image on
// --sandbox-base (the harness's current image, so nothing else is built),
// and a second run with the same list is a no-op.
func TestExtraPackagesOnTheEngine(t *testing.T) {
	cli := dockertest.Engine(t)
	base := dockertest.Image(t)
	tag := "agentbox-sandbox:extra-cli-" + suffix(t)
	t.Cleanup(func() { _ = cli.RemoveImage(context.Background(), tag) })
	args := []string{"--image", tag, "--sandbox-base", base, "--extra-packages", "python3-tabulate"}
	code, stdout, stderr := runSetup(t, args...)
	if code != exitOK || !strings.Contains(stdout, "with Debian packages python3-tabulate") || !strings.Contains(stdout, "is ready") {
		t.Fatalf("first run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runSetup(t, append(args, "--quiet")...)
	if code != exitOK || stdout != tag+" is current\n" {
		t.Errorf("second run: exit %d, stdout %q, stderr %q; want a no-op", code, stdout, stderr)
	}
	out, err := imagesetup.RunOnce(context.Background(), cli, tag, []string{"python3", "-c", "import tabulate; print('ok')"})
	if err != nil || strings.TrimSpace(out) != "ok" {
		t.Errorf("import tabulate in %s: %q, %v", tag, out, err)
	}
}
