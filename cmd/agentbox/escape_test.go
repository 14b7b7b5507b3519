package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// hostile is text a sandbox could print or use as a name: an OSC 52
// clipboard write, a screen clear, 8-bit and UTF-8 CSI, DEL, a carriage
// return that would overwrite the line, bidi overrides and isolates, and a
// line separator.
const hostile = "evil\x1b]52;c;aGk=\x07\x1b[2J\x9b\u009b[31m\x7f\rhidden\u202efdp.exe\u2066x\u2069\u2028\u0085\x00end"

// unsafeAt returns the offset of the first thing in s a terminal could act
// on, or -1: a control byte other than newline and tab (a carriage return
// only right before a newline), DEL, invalid UTF-8, a C1 control, a bidi
// control or a line or paragraph separator.
func unsafeAt(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return i
		case r == '\n', r == '\t':
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
			return i
		case r == '\u061c', r == '\u200e', r == '\u200f', r >= '\u202a' && r <= '\u202e',
			r >= '\u2066' && r <= '\u2069', r == '\u2028', r == '\u2029':
			return i
		}
		i += n
	}
	return -1
}

func checkTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if i := unsafeAt(out); i >= 0 {
		lo, hi := max(i-40, 0), min(i+40, len(out))
		t.Errorf("%s: terminal control at byte %d: %q", what, i, out[lo:hi])
	}
}

// TestPrinterEscapesSandboxText streams and finishes an execution whose
// every text is hostile: output, rich results, the exception, the restart
// reason, truncation and artifact names. Nothing may reach the terminal
// raw, yet the text must still show, escaped, and "\r\n" line ends stay.
func TestPrinterEscapesSandboxText(t *testing.T) {
	res := &session.Result{
		ID:              hostile,
		Stdout:          hostile + "\r\n",
		Stderr:          hostile,
		Outputs:         []kernel.Output{{Kind: hostile, Data: map[string]string{hostile: "x"}}, {Kind: "execute_result", Data: map[string]string{"text/plain": hostile}}},
		Error:           &kernel.Exception{Name: hostile, Value: hostile},
		KernelRestarted: true,
		RestartReason:   hostile,
		Replayed:        true,
		Truncated:       map[string]int64{hostile: 10},
		Artifacts:       []session.Artifact{{Name: hostile, URL: hostile}},
	}
	for _, streamed := range []bool{false, true} {
		var stdout, stderr strings.Builder
		p := newPrinter(&stdout, &stderr, false)
		if streamed {
			// A line end split across two events is still a line end.
			p.event(kernel.Event{Type: kernel.EventStream, Name: "stdout", Text: hostile + "\r"})
			p.event(kernel.Event{Type: kernel.EventStream, Name: "stdout", Text: "\n"})
			p.event(kernel.Event{Type: kernel.EventStream, Name: "stderr", Text: hostile})
			p.event(kernel.Event{Type: kernel.EventDisplay, Kind: hostile, Data: map[string]string{hostile: "x"}})
			p.event(kernel.Event{Type: kernel.EventDisplay, Kind: "execute_result", Data: map[string]string{"text/plain": hostile}})
		}
		r := *res
		if streamed {
			r.Error = &kernel.Exception{Name: "E", Traceback: []string{hostile, hostile}}
		}
		p.finish(&r)
		checkTerminalSafe(t, "stdout", stdout.String())
		checkTerminalSafe(t, "stderr", stderr.String())
		for _, out := range []string{stdout.String(), stderr.String()} {
			if !strings.Contains(out, `\x1b]52;c;aGk=`) || !strings.Contains(out, `\u202e`) || !strings.Contains(out, `\rhidden`) {
				t.Errorf("streamed %v: the hostile text does not show escaped:\n%s", streamed, out)
			}
		}
		if !strings.Contains(stdout.String(), "end\r\n") {
			t.Errorf("streamed %v: the \\r\\n line end was not kept: %q", streamed, stdout.String())
		}
	}

	// Output that ends in a carriage return (a progress bar's last frame)
	// still shows it, escaped, when the execution finishes.
	var stdout, stderr strings.Builder
	p := newPrinter(&stdout, &stderr, false)
	p.event(kernel.Event{Type: kernel.EventStream, Name: "stdout", Text: "50%\r100%\r"})
	p.finish(&session.Result{})
	if stdout.String() != `50%\r100%\r` {
		t.Errorf("stdout = %q, want %q", stdout.String(), `50%\r100%\r`)
	}
}

// TestWriteTableEscapesSandboxText lists a session whose key, id, container
// and state are hostile.
func TestWriteTableEscapesSandboxText(t *testing.T) {
	var b strings.Builder
	writeTable(&b, []session.Info{{Key: hostile, ID: hostile, ContainerID: hostile, State: hostile}}, time.Now())
	checkTerminalSafe(t, "ls", b.String())
	if lines := strings.Count(b.String(), "\n"); lines != 2 {
		t.Errorf("ls printed %d lines for one session, want a header and one row:\n%s", lines, b.String())
	}
}

// TestFailureEscapesSandboxText prints an error whose text came from the
// sandbox (a kernel message, a file name).
func TestFailureEscapesSandboxText(t *testing.T) {
	var b strings.Builder
	failure(context.Background(), &b, errors.New("kernel said: "+hostile))
	checkTerminalSafe(t, "stderr", b.String())
	if strings.Count(b.String(), "\n") != 1 {
		t.Errorf("stderr = %q, want one line", b.String())
	}
}

// TestPrinterRaw checks that --raw passes the code's output through as it
// is, while names, notes and the exception stay escaped.
func TestPrinterRaw(t *testing.T) {
	var stdout, stderr strings.Builder
	p := newPrinter(&stdout, &stderr, true)
	p.event(kernel.Event{Type: kernel.EventStream, Name: "stdout", Text: "\x1b[31mred\x1b[0m\r"})
	p.event(kernel.Event{Type: kernel.EventStream, Name: "stderr", Text: "\x1b[33mwarn\x1b[0m\n"})
	p.event(kernel.Event{Type: kernel.EventDisplay, Kind: hostile, Data: map[string]string{"image/png": "x"}})
	p.finish(&session.Result{Error: &kernel.Exception{Name: hostile, Value: hostile},
		Artifacts: []session.Artifact{{Name: hostile}}})
	if !strings.HasPrefix(stdout.String(), "\x1b[31mred\x1b[0m\r") {
		t.Errorf("--raw stdout = %q, want the output as it was", stdout.String())
	}
	if !strings.HasPrefix(stderr.String(), "\x1b[33mwarn\x1b[0m\n") {
		t.Errorf("--raw stderr = %q, want the output as it was", stderr.String())
	}
	checkTerminalSafe(t, "display name", strings.TrimPrefix(stdout.String(), "\x1b[31mred\x1b[0m\r"))
	checkTerminalSafe(t, "exception and notes", strings.TrimPrefix(stderr.String(), "\x1b[33mwarn\x1b[0m\n"))
}

// TestExecEscapesSandboxOutput runs code in a real sandbox that prints an
// OSC 52 clipboard write and a screen clear and names an artifact with
// them: by default all of it shows escaped; with --raw the output (only)
// reaches the terminal as it is.
func TestExecEscapesSandboxOutput(t *testing.T) {
	sandboxEnv(t)
	code := `import sys, os
os.makedirs("/session/artifacts", exist_ok=True)
open("/session/artifacts/x\x1b]52;c;aGk=\x07.txt", "w").write("x")
print("a\x1b]52;c;aGk=\x07b\rc\x1b[2J")
print("err\x1b[31m", file=sys.stderr)`
	r := agentbox(t, "", "exec", code)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkTerminalSafe(t, "stdout", r.stdout)
	checkTerminalSafe(t, "stderr", r.stderr)
	if r.stdout != `a\x1b]52;c;aGk=\ab\rc\x1b[2J`+"\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if !strings.Contains(r.stderr, `err\x1b[31m`) || !strings.Contains(r.stderr, `artifact x\x1b]52;c;aGk=\a.txt`) {
		t.Errorf("stderr = %q, want the output and the artifact name escaped", r.stderr)
	}

	// --json holds the output exactly, with the controls JSON leaves raw
	// (here C1 CSI and a bidi override) spelled as escapes.
	jsonCode := code + "\nprint('\u009b2J\u202e')"
	r = agentbox(t, "", "exec", "--json", jsonCode)
	if r.code != exitOK {
		t.Fatalf("--json: exit %d: %s", r.code, r.stderr)
	}
	checkTerminalSafe(t, "--json stdout", r.stdout)
	var res struct{ Stdout string }
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--json: %v: %q", err, r.stdout)
	}
	if want := "a\x1b]52;c;aGk=\x07b\rc\x1b[2J\n\u009b2J\u202e\n"; res.Stdout != want {
		t.Errorf("--json stdout %q, want %q", res.Stdout, want)
	}

	r = agentbox(t, "", "exec", "--raw", code)
	if r.code != exitOK {
		t.Fatalf("--raw: exit %d: %s", r.code, r.stderr)
	}
	if r.stdout != "a\x1b]52;c;aGk=\x07b\rc\x1b[2J\n" {
		t.Errorf("--raw stdout = %q, want the output as it was", r.stdout)
	}
	if !strings.Contains(r.stderr, `artifact x\x1b]52;c;aGk=\a.txt`) {
		t.Errorf("--raw stderr = %q, want the artifact name still escaped", r.stderr)
	}
}
