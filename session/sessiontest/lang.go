package sessiontest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// value is a Python int or str.
type value struct {
	isStr bool
	str   string
	num   int64
}

func (v value) typ() string {
	if v.isStr {
		return "str"
	}
	return "int"
}

// repr is the value as Python shows it (42, 'abc').
func (v value) repr() string {
	if v.isStr {
		return "'" + v.str + "'"
	}
	return strconv.FormatInt(v.num, 10)
}

// text is the value as print writes it.
func (v value) text() string {
	if v.isStr {
		return v.str
	}
	return strconv.FormatInt(v.num, 10)
}

func sortedKeys(m map[string]value) []string { return slices.Sorted(maps.Keys(m)) }

func exception(name, value string) *kernel.Exception {
	return &kernel.Exception{Name: name, Value: value, Traceback: []string{name + ": " + value}}
}

// interpret runs ex's code, statement by statement, and returns the
// exception it raised, if any. It runs without k.mu, taking it for each
// statement.
func (k *fakeKernel) interpret(ex *execution) *kernel.Exception {
	stmts := statements(ex.code)
	for i, s := range stmts {
		select {
		case <-ex.stop:
			return exception("KeyboardInterrupt", "")
		default:
		}
		if exc := k.statement(ex, s, i == len(stmts)-1); exc != nil {
			return exc
		}
	}
	return nil
}

// statement runs one statement of the tiny language (see the package
// documentation); last says whether a bare expression is displayed.
func (k *fakeKernel) statement(ex *execution, s string, last bool) *kernel.Exception {
	if arg, ok := call(s, "sleep", "time.sleep"); ok {
		secs, err := strconv.ParseFloat(arg, 64)
		if err != nil {
			return exception("TypeError", fmt.Sprintf("'%s' is not a number of seconds", arg))
		}
		t := time.NewTimer(time.Duration(secs * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ex.stop:
		case <-k.dead:
		}
		return exception("KeyboardInterrupt", "")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if arg, ok := call(s, "print"); ok {
		text := arg
		if v, ok, exc := k.eval(arg); exc != nil {
			return exc
		} else if ok {
			text = v.text()
		}
		k.publish(ex, msg{"type": "stream", "id": ex.id, "name": "stdout", "text": text + "\n"})
		return nil
	}
	if rest, ok := strings.CutPrefix(s, "raise "); ok {
		name, arg, _ := strings.Cut(strings.TrimSuffix(rest, ")"), "(")
		if v, ok := literal(strings.TrimSpace(arg)); ok {
			arg = v.text()
		}
		return exception(strings.TrimSpace(name), arg)
	}
	if name, expr, ok := strings.Cut(s, "="); ok && isName(strings.TrimSpace(name)) && !strings.HasPrefix(expr, "=") {
		v, ok, exc := k.eval(expr)
		if exc != nil {
			return exc
		}
		if ok {
			k.vars[strings.TrimSpace(name)] = v
		}
		return nil
	}
	v, ok, exc := k.eval(s)
	if exc != nil {
		return exc
	}
	if ok && last {
		k.publish(ex, msg{"type": "display", "id": ex.id, "kind": "execute_result", "data": map[string]string{"text/plain": v.repr()}})
	}
	return nil
}

// statements splits code into statements at newlines and at semicolons
// outside quotes, dropping blank lines, comments and imports.
func statements(code string) []string {
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if s != "" && !strings.HasPrefix(s, "import ") && !strings.HasPrefix(s, "from ") {
			out = append(out, s)
		}
	}
	for _, line := range strings.Split(code, "\n") {
		var quote byte
		start := 0
	scan:
		for i := 0; ; i++ {
			if i == len(line) {
				add(line[start:])
				break
			}
			switch c := line[i]; {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote = c
			case c == ';':
				add(line[start:i])
				start = i + 1
			case c == '#':
				add(line[start:i])
				break scan
			}
		}
	}
	return out
}

// call returns the argument text of s if it is a call of one of fns.
func call(s string, fns ...string) (string, bool) {
	for _, fn := range fns {
		if arg, ok := strings.CutPrefix(s, fn+"("); ok && strings.HasSuffix(arg, ")") {
			return strings.TrimSpace(strings.TrimSuffix(arg, ")")), true
		}
	}
	return "", false
}

func isName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// literal parses an int or a quoted string (no escapes).
func literal(s string) (value, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return value{num: n}, true
	}
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] && !strings.ContainsRune(s[1:len(s)-1], rune(s[0])) {
		return value{isStr: true, str: s[1 : len(s)-1]}, true
	}
	return value{}, false
}

// eval evaluates an expression of ints, strings and names joined by +, - and
// * (with the usual precedence). ok is false if s is not such an
// expression; exc is the exception evaluating it raised. k.mu is held.
func (k *fakeKernel) eval(s string) (v value, ok bool, exc *kernel.Exception) {
	toks, ok := tokens(s)
	if !ok || len(toks)%2 == 0 {
		return value{}, false, nil
	}
	for i, t := range toks {
		if isOp := t == "+" || t == "-" || t == "*"; isOp != (i%2 == 1) {
			return value{}, false, nil
		}
	}
	operand := func(t string) (value, *kernel.Exception) {
		if v, ok := literal(t); ok {
			return v, nil
		}
		v, ok := k.vars[t]
		if !ok {
			return value{}, exception("NameError", fmt.Sprintf("name '%s' is not defined", t))
		}
		return v, nil
	}
	// Products first, then sums and differences left to right.
	var terms []value
	var ops []string
	cur, exc := operand(toks[0])
	for i := 1; i < len(toks) && exc == nil; i += 2 {
		var rhs value
		if rhs, exc = operand(toks[i+1]); exc != nil {
			break
		}
		if toks[i] == "*" {
			cur, exc = apply(cur, "*", rhs)
			continue
		}
		terms, ops, cur = append(terms, cur), append(ops, toks[i]), rhs
	}
	if exc != nil {
		return value{}, true, exc
	}
	terms = append(terms, cur)
	v = terms[0]
	for i, op := range ops {
		if v, exc = apply(v, op, terms[i+1]); exc != nil {
			return value{}, true, exc
		}
	}
	return v, true, nil
}

func apply(a value, op string, b value) (value, *kernel.Exception) {
	switch {
	case !a.isStr && !b.isStr:
		switch op {
		case "+":
			return value{num: a.num + b.num}, nil
		case "-":
			return value{num: a.num - b.num}, nil
		}
		return value{num: a.num * b.num}, nil
	case a.isStr && b.isStr && op == "+":
		return value{isStr: true, str: a.str + b.str}, nil
	case op == "*" && a.isStr != b.isStr:
		s, n := a.str+b.str, max(a.num, b.num)
		return value{isStr: true, str: strings.Repeat(s, int(max(n, 0)))}, nil
	}
	return value{}, exception("TypeError", fmt.Sprintf("unsupported operand type(s) for %s: '%s' and '%s'", op, a.typ(), b.typ()))
}

// tokens splits an expression into operands and operators; false if it
// holds anything else.
func tokens(s string) ([]string, bool) {
	var out []string
	s = strings.TrimSpace(s)
	for s != "" {
		switch c := s[0]; {
		case c == ' ' || c == '\t':
			s = s[1:]
			continue
		case c == '+' || c == '-' || c == '*':
			// A minus where an operand is due starts a negative number.
			if c == '-' && len(out)%2 == 0 && len(s) > 1 && s[1] >= '0' && s[1] <= '9' {
				break
			}
			out, s = append(out, s[:1]), s[1:]
			continue
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[1:], c)
			if end < 0 {
				return nil, false
			}
			out, s = append(out, s[:end+2]), s[end+2:]
			continue
		}
		end := 1
		for end < len(s) && (isName(s[end:end+1]) || s[end] >= '0' && s[end] <= '9') {
			end++
		}
		t := s[:end]
		if _, ok := literal(t); !ok && !isName(t) {
			return nil, false
		}
		out, s = append(out, t), s[end:]
	}
	return out, true
}
