package main

import (
	"context"
	"strings"
	"testing"
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
