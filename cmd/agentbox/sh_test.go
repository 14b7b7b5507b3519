package main

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestSh: the command's output and exit status, one argument as a command
// line and several as a program and its arguments, --env, --cwd, and the
// sandbox's escape sequences shown escaped.
func TestSh(t *testing.T) {
	sandboxEnv(t)
	r := agentbox(t, "", "sh", "--", "echo out; echo err >&2; exit 3")
	if r.code != 3 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = agentbox(t, "", "sh", "--env", "GREETING=a b", "--cwd", "/tmp", "--", "printf", "%s|%s|", "it's $GREETING", "x y")
	if r.code != 0 || r.stdout != "it's $GREETING|x y|" {
		t.Fatalf("arguments quoted: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = agentbox(t, "", "sh", "--env", "GREETING=a b", "--cwd", "/tmp", "--", `echo "$GREETING $PWD"`)
	if r.code != 0 || r.stdout != "a b /tmp\n" {
		t.Fatalf("env and cwd: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = agentbox(t, "", "sh", "--", `printf '\033]52;c;aGk=\a'`)
	if r.code != 0 || strings.Contains(r.stdout, "\x1b") || !strings.Contains(r.stdout, `\x1b`) {
		t.Fatalf("escape sequence: stdout %q", r.stdout)
	}
}

// TestShJSON prints one object with the keys the issue names.
func TestShJSON(t *testing.T) {
	sandboxEnv(t)
	r := agentbox(t, "", "sh", "--json", "--session", "j", "--", "echo hi; exit 4")
	if r.code != 4 || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"exit_code", "stdout", "stderr", "duration_ms", "timed_out", "session", "id", "interrupted"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %q in %v", k, slices.Sorted(maps.Keys(got)))
		}
	}
	if got["exit_code"] != 4.0 || got["stdout"] != "hi\n" || got["timed_out"] != false || got["session"] != "j" {
		t.Fatalf("%v", got)
	}
	r = agentbox(t, "", "sh", "--json", "--timeout", "1s", "--", "sleep 100")
	if r.code != shTimedOut || !strings.Contains(r.stdout, `"timed_out":true`) {
		t.Fatalf("timeout: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestShFailures: agentbox's own failures exit 125 and 126, never a small
// status the command could have returned.
func TestShFailures(t *testing.T) {
	sandboxEnv(t)
	r := agentbox(t, "", "sh", "--cwd", "/nope", "--", "true")
	if r.code != shNoStart || !strings.Contains(r.stderr, "/nope") {
		t.Fatalf("missing folder: exit %d, stderr %q", r.code, r.stderr)
	}
	r = agentbox(t, "", "sh", "--env", "1X=y", "--", "true")
	if r.code != shFailed || !strings.Contains(r.stderr, `"1X"`) {
		t.Fatalf("bad env name: exit %d, stderr %q", r.code, r.stderr)
	}
	r = agentbox(t, "", "sh", "--env", "noequals", "--", "true")
	if r.code != shFailed || !strings.Contains(r.stderr, "NAME=VALUE") {
		t.Fatalf("bad --env: exit %d, stderr %q", r.code, r.stderr)
	}
	r = agentbox(t, "", "sh")
	if r.code != shFailed || !strings.Contains(r.stderr, "no command") {
		t.Fatalf("no command: exit %d, stderr %q", r.code, r.stderr)
	}
	r = agentbox(t, "", "sh", "--json", "--cwd", "/nope", "--", "true")
	if r.code != shNoStart || !strings.Contains(r.stdout, `"error"`) {
		t.Fatalf("--json failure: exit %d, stdout %q", r.code, r.stdout)
	}
}
