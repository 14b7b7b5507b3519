package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
)

// tmuxPane drives a program in a detached tmux session on a server of its
// own, as a person at a terminal would.
type tmuxPane struct {
	t      *testing.T
	socket string
}

func (p *tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", p.socket}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// keys types keys (tmux key names such as Enter, Up, C-r, or text).
func (p *tmuxPane) keys(keys ...string) {
	p.t.Helper()
	p.tmux(append([]string{"send-keys", "-t", "repl"}, keys...)...)
}

// text types s literally.
func (p *tmuxPane) text(s string) {
	p.t.Helper()
	p.tmux("send-keys", "-t", "repl", "-l", s)
}

func (p *tmuxPane) screen() string {
	p.t.Helper()
	return p.tmux("capture-pane", "-p", "-J", "-t", "repl", "-S", "-200")
}

// waitFor waits until ok holds for the screen, and returns it.
func (p *tmuxPane) waitFor(what string, ok func(screen string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		s := p.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s; the screen:\n%s", what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lastLine is the last line of the screen that is not blank.
func lastLine(screen string) string {
	lines := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	return lines[len(lines)-1]
}

// needTmux returns after making sure tmux is installed: without it the test
// skips, or fails when AGENTBOX_REQUIRE_DOCKER=1 (CI installs it).
func needTmux(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv(dockertest.RequireEnv) == "1" {
			t.Fatalf("tmux is required (%s=1) for the terminal test: %v (apt-get install tmux)", dockertest.RequireEnv, err)
		}
		t.Skipf("no tmux: %v (apt-get install tmux; set %s=1 to make this a failure)", err, dockertest.RequireEnv)
	}
}

// TestReplTerminal drives `agentbox repl` in a terminal: the Up arrow
// recalls the previous line instead of typing ^[[A, Ctrl-R searches the
// history, "def f(:" is a SyntaxError at once (Python's own rule, asked of
// the session) where a block waits for its body, and the history persists
// in AGENTBOX_HISTORY.
func TestReplTerminal(t *testing.T) {
	needTmux(t)
	bin := filepath.Join(t.TempDir(), "agentbox")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sandboxEnv(t)
	hist := filepath.Join(t.TempDir(), "history")
	if err := os.WriteFile(hist, []byte("earlier = 'from the history file'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(historyEnv, hist)
	p := &tmuxPane{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock")}
	// The server inherits this process's environment, the test's settings
	// included. The shell line keeps the pane after the repl ends.
	p.tmux("-f", "/dev/null", "new-session", "-d", "-s", "repl", "-x", "120", "-y", "50",
		bin+" repl --session term; echo \"repl exited $?\"; sleep 600")
	t.Cleanup(func() { exec.Command("tmux", "-S", p.socket, "kill-server").Run() })
	atPrompt := func(s string) bool { return lastLine(s) == ">>>" || strings.HasSuffix(lastLine(s), ">>> ") }
	p.waitFor("the first prompt", atPrompt)

	p.text("x = 41")
	p.keys("Enter")
	p.waitFor("the prompt after x = 41", func(s string) bool { return strings.Count(s, ">>>") == 2 && atPrompt(s) })
	p.text("x + 1")
	p.keys("Enter")
	p.waitFor("42", func(s string) bool { return strings.Count(s, "\n42\n") == 1 && atPrompt(s) })

	// The Up arrow recalls "x + 1"; run again, it prints 42 again.
	p.keys("Up")
	p.waitFor("x + 1 recalled", func(s string) bool { return strings.HasSuffix(lastLine(s), ">>> x + 1") })
	p.keys("Enter")
	s := p.waitFor("42 twice", func(s string) bool { return strings.Count(s, "\n42\n") == 2 && atPrompt(s) })
	if strings.Contains(s, "^[") || strings.Contains(s, "[A") || strings.Contains(s, "Error") {
		t.Fatalf("the Up arrow was typed into the code:\n%s", s)
	}

	// A block waits for its body and a blank line.
	p.text("def g():")
	p.keys("Enter")
	p.waitFor("the continuation prompt", func(s string) bool {
		return strings.HasSuffix(lastLine(s), "...") || strings.HasSuffix(lastLine(s), "... ")
	})
	p.text("    return x * 2")
	p.keys("Enter", "Enter")
	p.waitFor("the block run", func(s string) bool { return strings.Count(s, ">>>") >= 5 && atPrompt(s) })
	p.text("g()")
	p.keys("Enter")
	p.waitFor("82", func(s string) bool { return strings.Contains(s, "\n82\n") && atPrompt(s) })

	// "def f(:" can never be completed: a SyntaxError now, then a fresh prompt.
	p.text("def f(:")
	p.keys("Enter")
	s = p.waitFor("the SyntaxError", func(s string) bool { return strings.Contains(s, "SyntaxError") && atPrompt(s) })
	if strings.HasSuffix(lastLine(s), "...") {
		t.Fatalf("def f(: waits for more input:\n%s", s)
	}

	// Ctrl-R finds a line of an earlier run, kept in the history file.
	p.keys("C-r")
	p.text("earlier =")
	p.waitFor("the search", func(s string) bool { return strings.Contains(lastLine(s), "earlier = 'from the history file'") })
	p.keys("Enter")
	p.text("earlier")
	p.keys("Enter")
	p.waitFor("the recalled line run", func(s string) bool {
		return strings.Contains(s, "\n'from the history file'\n") && atPrompt(s)
	})

	// Ctrl-D ends the repl, which saves the history.
	p.keys("C-d")
	s = p.waitFor("the exit", func(s string) bool { return strings.Contains(s, "repl exited 0") })
	t.Logf("the terminal:\n%s", strings.TrimRight(s, "\n"))
	data, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"earlier = 'from the history file'\n", "x + 1\n", "def f(:\n", "    return x * 2\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("history file lacks %q:\n%s", want, data)
		}
	}
	if fi, err := os.Stat(hist); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("history file mode %v, %v; want 0600", fi.Mode(), err)
	}
}
