package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestServeUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{[]string{"serve", "--help"}, exitOK, "SERVE_API_KEYS_FILE", ""},
		{[]string{"serve", "-h"}, exitOK, "OPEN-SANDBOX-API-KEY", ""},
		{[]string{"serve", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{[]string{"serve", "--port", "1"}, exitUsage, "", "flag provided but not defined"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr)
		if code != tt.code || !strings.Contains(stdout.String(), tt.out) || !strings.Contains(stderr.String(), tt.err) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.out, tt.err)
		}
	}
	var stdout bytes.Buffer
	run(context.Background(), []string{"help"}, nil, &stdout, &stdout)
	if !strings.Contains(stdout.String(), "serve ") {
		t.Errorf("agentbox help does not list serve")
	}
}
