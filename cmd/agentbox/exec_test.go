package main

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

func TestExecPrintsOutputAndResult(t *testing.T) {
	sandboxEnv(t)
	r := agentbox(t, "", "exec", `import sys; print("hi"); print("warn", file=sys.stderr); 6 * 7`)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if r.stdout != "hi\n42\n" {
		t.Errorf("stdout = %q, want the print then the trailing result", r.stdout)
	}
	if r.stderr != "warn\n" {
		t.Errorf("stderr = %q, want the code's stderr only", r.stderr)
	}
}

// TestExecStatePersists runs two invocations, each with its own manager as
// two processes would have: the second sees the first one's variable.
func TestExecStatePersists(t *testing.T) {
	sandboxEnv(t)
	if r := agentbox(t, "", "exec", "--session", "s1", "x = 41"); r.code != exitOK || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
	}
	r := agentbox(t, "", "exec", "--session", "s1", "x + 1")
	if r.code != exitOK || r.stdout != "42\n" {
		t.Errorf("exit %d, stdout %q, want 0 and 42: %s", r.code, r.stdout, r.stderr)
	}
	// Another key is another interpreter.
	r = agentbox(t, "", "exec", "--session", "s2", "x")
	if r.code != exitFailed || !strings.Contains(r.stderr, "NameError") {
		t.Errorf("exit %d, stderr %q, want 1 and a NameError", r.code, r.stderr)
	}
}

func TestExecFromStdin(t *testing.T) {
	sandboxEnv(t)
	code := "def f(n):\n    return n * 21\n\nprint(f(2))\n"
	for _, args := range [][]string{{"exec", "-"}, {"exec"}} {
		r := agentbox(t, code, args...)
		if r.code != exitOK || r.stdout != "42\n" {
			t.Errorf("%v: exit %d, stdout %q, want 0 and 42: %s", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestExecJSON checks that --json prints one line holding exactly the keys
// of session.Result's JSON form, and nothing else.
func TestExecJSON(t *testing.T) {
	sandboxEnv(t)
	wantKeys := []string{"artifacts", "duration_ms", "error", "execution_count", "id", "interrupted",
		"kernel_restarted", "replayed", "results", "session", "state_lost", "stderr", "stdout", "timed_out"}
	tests := []struct {
		name, code string
		exit       int
		check      func(t *testing.T, res map[string]any)
	}{
		{"value", `print("a"); 1 + 1`, exitOK, func(t *testing.T, res map[string]any) {
			if res["stdout"] != "a\n" || res["error"] != nil {
				t.Errorf("stdout %q, error %v", res["stdout"], res["error"])
			}
			results, _ := res["results"].([]any)
			if len(results) != 1 || results[0].(map[string]any)["text/plain"] != "2" {
				t.Errorf("results = %v, want one bundle with text/plain 2", res["results"])
			}
		}},
		{"exception", `1/0`, exitFailed, func(t *testing.T, res map[string]any) {
			e, _ := res["error"].(map[string]any)
			if e["name"] != "ZeroDivisionError" || e["value"] != "division by zero" {
				t.Errorf("error = %v", res["error"])
			}
			if _, ok := e["traceback"].([]any); !ok {
				t.Errorf("error has no traceback list: %v", e)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := agentbox(t, "", "exec", "--json", "--session", "j", tt.code)
			if r.code != tt.exit {
				t.Errorf("exit %d, want %d: %s", r.code, tt.exit, r.stderr)
			}
			if strings.Count(r.stdout, "\n") != 1 || !strings.HasSuffix(r.stdout, "\n") {
				t.Errorf("stdout is not one line: %q", r.stdout)
			}
			var res map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
				t.Fatalf("stdout is not a JSON object: %v: %q", err, r.stdout)
			}
			if got := slices.Sorted(maps.Keys(res)); !slices.Equal(got, wantKeys) {
				t.Errorf("keys = %v, want %v", got, wantKeys)
			}
			if res["session"] != "j" {
				t.Errorf("session = %v, want j", res["session"])
			}
			tt.check(t, res)
		})
	}
}

func TestExecFailures(t *testing.T) {
	sandboxEnv(t)
	tests := []struct {
		name string
		args []string
		want []string // in stderr
	}{
		{"exception", []string{"1/0"}, []string{"Traceback", "ZeroDivisionError: division by zero"}},
		{"timeout", []string{"--timeout", "1s", "import time; time.sleep(30)"}, []string{"KeyboardInterrupt", "timed out"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			r := agentbox(t, "", append([]string{"exec"}, tt.args...)...)
			if r.code != exitFailed {
				t.Errorf("exit %d, want %d: %s", r.code, exitFailed, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q does not contain %q", r.stderr, w)
				}
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
	// The session survives both: the interrupt kept its state.
	if r := agentbox(t, "", "exec", "print('alive')"); r.code != exitOK || r.stdout != "alive\n" {
		t.Errorf("after the failures: exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
	}
}

// TestExecReplay repeats an execution id: the second invocation prints the
// recorded result, and the code, which counts its own runs in a file, ran
// once.
func TestExecReplay(t *testing.T) {
	sandboxEnv(t)
	code := "with open('/session/runs', 'a') as f:\n    f.write('x')\nprint(len(open('/session/runs').read()))\n"
	first := agentbox(t, "", "exec", "--id", "call-1", code)
	if first.code != exitOK || first.stdout != "1\n" {
		t.Fatalf("first: exit %d, stdout %q: %s", first.code, first.stdout, first.stderr)
	}
	again := agentbox(t, "", "exec", "--id", "call-1", code)
	if again.code != exitOK || again.stdout != "1\n" {
		t.Errorf("again: exit %d, stdout %q, want the recorded 1: %s", again.code, again.stdout, again.stderr)
	}
	if !strings.Contains(again.stderr, "replayed") {
		t.Errorf("again: stderr %q does not say it was replayed", again.stderr)
	}
	j := agentbox(t, "", "exec", "--json", "--id", "call-1", code)
	var res map[string]any
	if err := json.Unmarshal([]byte(j.stdout), &res); err != nil || res["replayed"] != true || res["id"] != "call-1" {
		t.Errorf("--json replay: %v, %q", err, j.stdout)
	}
	if r := agentbox(t, "", "exec", code); r.stdout != "2\n" {
		t.Errorf("a new execution printed %q, want 2: the code ran more than once", r.stdout)
	}
	// The same id with other code is the caller's mistake.
	r := agentbox(t, "", "exec", "--id", "call-1", "print('other')")
	if r.code != exitUsage || !strings.Contains(r.stderr, "call-1") {
		t.Errorf("id conflict: exit %d, stderr %q, want %d naming the id", r.code, r.stderr, exitUsage)
	}
	oneErrorLine(t, r.stderr)
}

// TestPrinter checks, without an engine, that streamed output is not printed
// twice and that a replayed result (which streams nothing) prints in full.
func TestPrinter(t *testing.T) {
	res := &session.Result{
		ID:      "e1",
		Stdout:  "out\n",
		Stderr:  "err\n",
		Outputs: []kernel.Output{{Kind: "display_data", Data: map[string]string{"image/png": "AAAA"}}, {Kind: "execute_result", Data: map[string]string{"text/plain": "42"}}},
		Error:   &kernel.Exception{Name: "KeyboardInterrupt", Value: "timed out"},
	}
	tests := []struct {
		name             string
		events           []kernel.Event
		replayed         bool
		stdout, inStderr string
	}{
		{"streamed", []kernel.Event{
			{Type: kernel.EventStream, Name: "stdout", Text: "out\n"},
			{Type: kernel.EventStream, Name: "stderr", Text: "err\n"},
			{Type: kernel.EventDisplay, Kind: "display_data", Data: map[string]string{"image/png": "AAAA"}},
			{Type: kernel.EventDisplay, Kind: "execute_result", Data: map[string]string{"text/plain": "42"}},
		}, false, "out\n<display_data: image/png>\n42\n", "err\nKeyboardInterrupt: timed out\n"},
		{"replayed", nil, true, "out\n<display_data: image/png>\n42\n", "err\nKeyboardInterrupt: timed out\nagentbox: replayed: execution e1"},
		{"partly streamed", []kernel.Event{
			{Type: kernel.EventStream, Name: "stdout", Text: "out\n"},
		}, false, "out\n<display_data: image/png>\n42\n", "err\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			p := newPrinter(&stdout, &stderr, false)
			for _, ev := range tt.events {
				p.event(ev)
			}
			r := *res
			r.Replayed = tt.replayed
			p.finish(&r)
			if stdout.String() != tt.stdout {
				t.Errorf("stdout = %q, want %q", stdout.String(), tt.stdout)
			}
			if !strings.HasPrefix(stderr.String(), tt.inStderr) {
				t.Errorf("stderr = %q, want it to start with %q", stderr.String(), tt.inStderr)
			}
		})
	}
}

func TestDurationFlag(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30s", 30 * time.Second, true},
		{"2m", 2 * time.Minute, true},
		{"45", 45 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"0", 0, false},
		{"-1s", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		var d durationFlag
		err := d.Set(tt.in)
		if (err == nil) != tt.ok || (tt.ok && time.Duration(d) != tt.want) {
			t.Errorf("Set(%q) = %v, %v; want %v, ok %v", tt.in, time.Duration(d), err, tt.want, tt.ok)
		}
	}
}
