package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// TestCommandHelp: `agentbox CMD --help` and `agentbox help CMD` print that
// command's part of the usage, not the whole of it, and the usage lists
// every command there is.
func TestCommandHelp(t *testing.T) {
	for _, cmd := range []string{"exec", "repl", "ls", "stop", "cp", "files", "sh", "pause", "resume", "renew", "info"} {
		for _, args := range [][]string{{cmd, "--help"}, {cmd, "-h"}, {"help", cmd}} {
			r := agentbox(t, "", args...)
			if r.code != exitOK {
				t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
			}
			if !strings.HasPrefix(r.stdout, "usage: agentbox "+cmd) {
				t.Errorf("%v: stdout begins %q, want the usage of %s", args, firstLine(r.stdout), cmd)
			}
			if strings.Contains(r.stdout, "\ncommands:\n") {
				t.Errorf("%v: printed the whole usage, want %s's alone", args, cmd)
			}
			if !strings.Contains(r.stdout, "agentbox help") {
				t.Errorf("%v: does not point at agentbox help for the rest", args)
			}
		}
	}
	r := agentbox(t, "", "help")
	for _, cmd := range []string{"exec", "repl", "ls", "stop", "cp", "files", "sh", "pause", "resume", "renew", "info", "serve", "mcp", "tenant"} {
		if !strings.Contains(r.stdout, "\n  "+cmd+" ") {
			t.Errorf("agentbox help does not list the command %s", cmd)
		}
	}
	if r := agentbox(t, "", "help", "nosuch"); r.code != exitUsage || !strings.Contains(r.stderr, `unknown command "nosuch"`) {
		t.Errorf("help nosuch: exit %d, stderr %q", r.code, r.stderr)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestJSONEvenOnFailure: with --json, stdout holds one JSON object whatever
// happens, also for a bad flag and for a command that could not reach the
// engine, so a program reading it never gets nothing.
func TestJSONEvenOnFailure(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	t.Setenv("ARTIFACTS_DB", filepath.Join(t.TempDir(), "artifacts.db"))
	for _, tc := range []struct {
		args []string
		kind string
	}{
		{[]string{"exec", "--json", "--bogus", "1"}, "usage"},
		{[]string{"sh", "--json", "--bogus", "--", "true"}, ""},
		{[]string{"ls", "--json", "--bogus"}, "usage"},
		{[]string{"info", "--json", "--bogus", "k"}, "usage"},
		{[]string{"files", "--json", "--bogus"}, "usage"},
		{[]string{"ls", "--json"}, ""},
		{[]string{"info", "k", "--json"}, ""},
		{[]string{"files", "--json", "/session"}, ""},
		{[]string{"exec", "--json", "1"}, ""},
		// Every spelling of true the flag package takes keeps the
		// promise; before, only --json, -json and =true did.
		{[]string{"ls", "--json=1", "--bogus"}, "usage"},
		{[]string{"info", "-json=t", "--bogus", "k"}, "usage"},
		{[]string{"exec", "--json=TRUE", "--bogus", "1"}, "usage"},
		{[]string{"files", "-json=True", "--bogus"}, "usage"},
	} {
		r := agentbox(t, "", tc.args...)
		if r.code == exitOK {
			t.Errorf("%v: exit 0, want a failure", tc.args)
			continue
		}
		var v struct {
			Error struct {
				Kind    string `json:"kind"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Error.Message == "" {
			t.Errorf("%v: exit %d, stdout %q (%v): want one JSON object with error.kind and error.message; stderr %q",
				tc.args, r.code, r.stdout, err, r.stderr)
			continue
		}
		if tc.kind != "" && v.Error.Kind != tc.kind {
			t.Errorf("%v: error.kind %q, want %q", tc.args, v.Error.Kind, tc.kind)
		}
		if strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
			t.Errorf("%v: stdout has more than one line: %q", tc.args, r.stdout)
		}
	}
}

// TestTenantOfAKey: `agentbox tenant` maps API keys (on stdin) to the
// tenant ids agentbox ls shows, the same ones agentbox serve uses.
func TestTenantOfAKey(t *testing.T) {
	keys := []string{"first-key-0123456789abcdef", "second-key-0123456789abcdef"}
	r := agentbox(t, keys[0]+"\n\n"+keys[1]+"\n", "tenant")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	all := tenant.NewKeys(keys)
	var want []string
	for _, k := range keys {
		tn, err := all.Lookup(k)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, tn.ID)
	}
	if got := strings.Fields(r.stdout); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tenant ids %q, want %q", got, want)
	}
	if r := agentbox(t, "", "tenant", keys[0]); r.code != exitUsage || strings.Contains(r.stdout+r.stderr, keys[0]) {
		t.Errorf("a key as an argument: exit %d, output %q %q: want a refusal that does not repeat the key", r.code, r.stdout, r.stderr)
	}
	if r := agentbox(t, "", "tenant"); r.code != exitUsage {
		t.Errorf("no key: exit %d", r.code)
	}
}

// TestAnnounceStartOnlyAtATerminal: the notice that a new key's sandbox is
// starting goes to a person's terminal, never into the stderr a program
// reads (tests and agents compare it).
func TestAnnounceStartOnlyAtATerminal(t *testing.T) {
	var buf strings.Builder
	announceStart(context.Background(), missing{}, "k", &buf)
	if buf.Len() != 0 {
		t.Errorf("printed %q to a writer that is not a terminal", buf.String())
	}
	if got := startNotice("a\x1b[2Jb"); strings.ContainsRune(got, 0x1b) || !strings.Contains(got, "starting session") {
		t.Errorf("notice %q: want it escaped and saying the session starts", got)
	}
}

type missing struct{}

func (missing) Info(context.Context, string, ...session.InfoOption) (session.Info, error) {
	return session.Info{}, session.ErrNotFound
}
