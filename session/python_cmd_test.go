package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
)

// runInSession runs line as a command in key's session, failing the test when it
// cannot run at all.
func runInSession(t *testing.T, m *session.Manager, key, line string) *session.CommandResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := m.Run(ctx, key, session.Command{Line: line})
	if err != nil {
		t.Fatalf("run %q: %v", line, err)
	}
	return res
}

// TestPythonAndPipCommands: programs written for OpenSandbox, E2B and
// LangGraph-Sandbox images run `python` (not only `python3`), and a `pip`
// that cannot install says where the packages come from instead of
// "command not found" (issue 24 row 2). Before, both exited 127.
func TestPythonAndPipCommands(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	if res := runInSession(t, m, "k", "python -c 'print(1)'"); res.ExitCode != 0 || res.Stdout != "1\n" {
		t.Errorf("python -c 'print(1)': exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := runInSession(t, m, "k", "python -c 'import sys; print(sys.version_info[0])'"); res.Stdout != "3\n" {
		t.Errorf("python is not Python 3: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	for _, pip := range []string{"pip", "pip3"} {
		res := runInSession(t, m, "k", pip+" install requests")
		if res.ExitCode == 0 || res.ExitCode == 127 {
			t.Errorf("%s install: exit %d, want a refusal (not 0, not 127: command not found); stderr %q", pip, res.ExitCode, res.Stderr)
		}
		for _, want := range []string{"Debian packages", "no network", "SANDBOX_EXTRA_PACKAGES", "FROM agentbox-sandbox"} {
			if !strings.Contains(res.Stderr, want) {
				t.Errorf("%s install: the message does not say %q:\n%s", pip, want, res.Stderr)
			}
		}
	}
	// What is installed can be listed, as pip would.
	if res := runInSession(t, m, "k", "pip list"); res.ExitCode != 0 || !strings.Contains(strings.ToLower(res.Stdout), "numpy") {
		t.Errorf("pip list: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}
