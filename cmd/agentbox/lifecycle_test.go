package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestLifecycleUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"pause"}, "one session KEY"},
		{[]string{"resume", "a", "b"}, "one session KEY"},
		{[]string{"renew", "k"}, "KEY and a DURATION"},
		{[]string{"renew", "k", "soon"}, `duration "soon"`},
		{[]string{"renew", "k", "-5m"}, "more than 0"},
		{[]string{"info"}, "one session KEY"},
		{[]string{"info", "--yaml", "k"}, "-yaml"},
		{[]string{"exec", "--env", "NOEQUALS", "1"}, "NAME=value"},
		{[]string{"exec", "--label", "=x", "1"}, "NAME=value"},
		{[]string{"exec", "--ttl", "forever", "1"}, "ttl"},
	} {
		r := agentbox(t, "", tt.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d mentioning %q", tt.args, r.code, r.stderr, exitUsage, tt.want)
		}
		oneErrorLine(t, r.stderr)
	}
}

// TestLifecycleCommands drives a session through the commands, each a new
// process: exec --env --ttl creates it, info shows it, pause freezes it (an
// exec is refused and says how to go on), resume thaws it with its state,
// renew moves the expiry, and a refused option exits 2.
func TestLifecycleCommands(t *testing.T) {
	sandboxEnv(t)
	t.Setenv("SANDBOX_MAX_MEMORY_MB", "")
	r := agentbox(t, "", "exec", "--session", "lc", "--env", "GREETING=hi there", "--label", "owner=alice", "--ttl", "10m",
		"import os; x = 41; os.environ['GREETING']")
	if r.code != exitOK || r.stdout != "'hi there'\n" {
		t.Fatalf("exec --env: exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
	}
	r = agentbox(t, "", "info", "lc")
	for _, want := range []string{"session     lc\n", "state       running\n", "labels      owner=alice\n", "time to live 10m0s", "executions  1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("info does not show %q:\n%s", want, r.stdout)
		}
	}
	if r = agentbox(t, "", "pause", "lc"); r.code != exitOK || r.stdout != "paused lc\n" {
		t.Fatalf("pause: exit %d, %q: %s", r.code, r.stdout, r.stderr)
	}
	r = agentbox(t, "", "exec", "--session", "lc", "x")
	if r.code != exitSandbox || !strings.Contains(r.stderr, "session paused") || !strings.Contains(r.stderr, "agentbox resume") {
		t.Errorf("exec on a paused session: exit %d, stderr %q", r.code, r.stderr)
	}
	oneErrorLine(t, r.stderr)
	r = agentbox(t, "", "info", "lc", "--json") // as the usage writes it
	var in struct {
		State   string            `json:"state"`
		Paused  time.Time         `json:"paused"`
		Expires time.Time         `json:"expires"`
		Labels  map[string]string `json:"labels"`
		Limits  struct {
			MemoryMB int `json:"memory_mb"`
		} `json:"limits"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil || in.State != "paused" || in.Paused.IsZero() || in.Labels["owner"] != "alice" || in.Limits.MemoryMB != 1024 {
		t.Errorf("info --json: %v: %+v from %s", err, in, r.stdout)
	}
	if r = agentbox(t, "", "resume", "lc"); r.code != exitOK || r.stdout != "resumed lc\n" {
		t.Fatalf("resume: exit %d, %q: %s", r.code, r.stdout, r.stderr)
	}
	if r = agentbox(t, "", "exec", "--session", "lc", "x + 1"); r.code != exitOK || r.stdout != "42\n" {
		t.Errorf("exec after resume: exit %d, %q: %s", r.code, r.stdout, r.stderr)
	}
	r = agentbox(t, "", "renew", "lc", "2h")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "renewed lc: expires ") {
		t.Errorf("renew: exit %d, %q: %s", r.code, r.stdout, r.stderr)
	}
	r = agentbox(t, "", "info", "--json", "lc")
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil || time.Until(in.Expires) < 119*time.Minute {
		t.Errorf("after renew 2h, expires %v (%v)", in.Expires, err)
	}
	for _, args := range [][]string{{"pause", "none"}, {"resume", "none"}, {"renew", "none", "1m"}, {"info", "none"}} {
		if r := agentbox(t, "", args...); r.code != exitFailed || !strings.Contains(r.stderr, `no such session "none"`) {
			t.Errorf("%q: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	r = agentbox(t, "", "exec", "--session", "new", "--env", "LD_PRELOAD=/session/x.so", "1")
	if r.code != exitUsage || !strings.Contains(r.stderr, `env "LD_PRELOAD": reserved`) {
		t.Errorf("exec --env LD_PRELOAD: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestExpiredSessionViews: once a session's time to live has passed, each
// new process (info, ls) says it expired, though no sweep removed it
// (issue 24 row 8: it said "running" until one did), and the next exec
// runs in a fresh session that says the old one expired.
func TestExpiredSessionViews(t *testing.T) {
	sandboxEnv(t)
	r := agentbox(t, "", "exec", "--session", "ttl", "--ttl", "3s", "x = 1")
	if r.code != exitOK {
		t.Fatalf("exec --ttl: exit %d: %s", r.code, r.stderr)
	}
	r = agentbox(t, "", "info", "--json", "ttl")
	var in struct {
		State   string    `json:"state"`
		Expires time.Time `json:"expires"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil || in.Expires.IsZero() {
		t.Fatalf("info --json: %v: %s", err, r.stdout)
	}
	for !time.Now().After(in.Expires) {
		time.Sleep(time.Until(in.Expires) + 10*time.Millisecond)
	}
	if r = agentbox(t, "", "info", "ttl"); !strings.Contains(r.stdout, "state       stopped: expired: its time to live ended at ") {
		t.Errorf("info past the expiry: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Each command sweeps once as it starts, which may remove the
	// container meanwhile: ls then no longer lists it.
	if r = agentbox(t, "", "ls"); strings.Contains(r.stdout, "running") {
		t.Errorf("ls past the expiry:\n%s", r.stdout)
	}
	r = agentbox(t, "", "exec", "--session", "ttl", "'x' in globals()")
	if r.code != exitOK || r.stdout != "False\n" || !strings.Contains(r.stderr, "expired") {
		t.Errorf("exec past the expiry: exit %d, stdout %q, stderr %q; want a fresh session saying the old one expired", r.code, r.stdout, r.stderr)
	}
}
