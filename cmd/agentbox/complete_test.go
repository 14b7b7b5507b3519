package main

import (
	"strings"
	"testing"
)

func TestNeedsMore(t *testing.T) {
	tests := []struct {
		name  string
		lines []string // typed so far, the last one just now
		more  bool
	}{
		{"simple statement", []string{"x = 1"}, false},
		{"expression", []string{"f()"}, false},
		{"comment only", []string{"# note"}, false},
		{"block header", []string{"def f():"}, true},
		{"block header with comment", []string{"if x:  # why"}, true},
		{"block body", []string{"def f():", "    return 1"}, true},
		{"block ends at blank line", []string{"def f():", "    return 1", ""}, false},
		{"else keeps the block open", []string{"if x:", "    a", "else:", "    b"}, true},
		{"one-line compound statement", []string{"if x: pass"}, false},
		{"open paren", []string{"print(1,"}, true},
		{"closed paren", []string{"print(1,", "2)"}, false},
		{"blank line inside brackets", []string{"x = [", ""}, true},
		{"nested brackets", []string{"d = {'a': [1, (2,"}, true},
		{"slice colon", []string{"y = a[1:]"}, false},
		{"dict colon at line end", []string{"d = {1:"}, true},
		{"backslash continuation", []string{`x = 1 + \`}, true},
		{"after backslash", []string{`x = 1 + \`, "2"}, false},
		{"backslash in comment", []string{`x = 1  # \`}, false},
		{"open triple string", []string{`s = """abc`}, true},
		{"blank line in triple string", []string{`s = """abc`, ""}, true},
		{"closed triple string", []string{`s = """abc`, "", `def"""`}, false},
		{"single-quoted triple", []string{"s = '''", "x'''"}, false},
		{"colon inside string", []string{`print("a:")`}, false},
		{"bracket inside string", []string{`print("(")`}, false},
		{"hash inside string", []string{`print("#(")`}, false},
		{"escaped quote", []string{`print("a\"(")`}, false},
		{"string continued by backslash", []string{`s = "ab\`}, true},
		{"unterminated string", []string{`s = "ab`}, false},
		{"unmatched closer", []string{"x = 1)"}, false},
		{"decorator", []string{"@cache"}, true},
		{"decorated function", []string{"@cache", "def f():"}, true},
		{"colon in triple string", []string{`s = """a:`}, true},
		{"windows line ending", []string{"def f():\r"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsMore(strings.Join(tt.lines, "\n")); got != tt.more {
				t.Errorf("needsMore(%q) = %v, want %v", tt.lines, got, tt.more)
			}
		})
	}
}
