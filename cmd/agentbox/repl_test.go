package main

import (
	"strings"
	"testing"
)

func TestRepl(t *testing.T) {
	sandboxEnv(t)
	tests := []struct {
		name, script string
		stdout       []string // in order
		stderr       []string
	}{
		{"block then call", "x = 1\ndef f():\n    return x + 1\n\nf()\n", []string{"2\n"}, []string{">>> ", "... "}},
		{"state from the previous script", "f() * 10\n", []string{"20\n"}, nil},
		{"error does not end it", "1/0\nprint('next')\n", []string{"next\n"}, []string{"ZeroDivisionError"}},
		{"pending input runs at EOF", "for i in range(2):\n    print(i)", []string{"0\n1\n"}, nil},
		{"string with blank line", "s = '''a\n\nb'''\nprint(s)\n", []string{"a\n\nb\n"}, nil},
		{"invalid input runs at once", "def f(:\nprint('after')\n", []string{"after\n"}, []string{"SyntaxError"}},
		{"pasted statements run as one cell", "for i in range(2):\n    print(i)\nprint('end')\n", []string{"0\n1\nend\n"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := agentbox(t, tt.script, "repl", "--session", "r")
			if r.code != exitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			rest := r.stdout
			for _, w := range tt.stdout {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stdout %q lacks %q (in order)", r.stdout, w)
				}
				rest = rest[i+len(w):]
			}
			for _, w := range tt.stderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q lacks %q", r.stderr, w)
				}
			}
			if strings.Contains(r.stdout, ">>>") {
				t.Errorf("prompts on stdout: %q", r.stdout)
			}
		})
	}
}
