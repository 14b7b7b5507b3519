package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/session"
)

// commandHelp is `agentbox help COMMAND`.
func commandHelp(ctx context.Context, cmd string, stdout, stderr io.Writer) int {
	switch cmd {
	case "serve", "mcp":
		return dispatch(ctx, cmd, []string{"--help"}, strings.NewReader(""), stdout, stderr)
	}
	if !commandUsage(stdout, cmd) {
		fmt.Fprintf(stderr, "agentbox: help: unknown command %q (see agentbox help)\n", cmd)
		return exitUsage
	}
	return exitOK
}

// commandUsage prints cmd's part of the usage (its line and the indented
// lines of its flags), and says where the rest is; false when the usage
// has no such command.
func commandUsage(w io.Writer, cmd string) bool {
	var all bytes.Buffer
	usage(&all)
	var (
		out     []string
		inBlock bool
	)
	for line := range strings.SplitSeq(all.String(), "\n") {
		switch {
		case line == "commands:":
			inBlock = true
		case !inBlock:
		case line == "":
			inBlock = false
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   "):
			// A command's first line: "  NAME ARGS    what it does".
			if len(out) > 0 {
				inBlock = false
				break
			}
			if name, _, _ := strings.Cut(strings.TrimSpace(line), " "); name == cmd {
				out = append(out, "usage: agentbox "+strings.TrimSpace(line))
			}
		case len(out) > 0:
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return false
	}
	fmt.Fprintf(w, "%s\n\nexit status, environment and the other commands: agentbox help\n", strings.Join(out, "\n"))
	return true
}

// jsonCommands are the commands whose --json promises one JSON object on
// stdout.
var jsonCommands = map[string]bool{"exec": true, "sh": true, "ls": true, "info": true, "files": true}

// wantsJSON says whether args ask for --json before a "--" (after it, the
// words are sh's command), as the flag package reads them: the last one
// wins, and --json=V is any true of strconv.ParseBool (1, t, TRUE, ...).
func wantsJSON(args []string) bool {
	want := false
	for _, a := range args {
		if a == "--" {
			break
		}
		name, v, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if name != "json" || !strings.HasPrefix(a, "-") {
			continue
		}
		if !hasValue {
			want = true
			continue
		}
		b, err := strconv.ParseBool(v)
		want = err == nil && b
	}
	return want
}

// jsonAlways runs a --json command and keeps its promise when it failed
// before printing anything (a bad flag, no engine): stdout then gets the
// failure object that exec prints, {"session", "error": {"kind",
// "message"}}, with what stderr said.
func jsonAlways(cmd string, args []string, stdout, stderr io.Writer, run func(stdout, stderr io.Writer) int) int {
	out := &countingWriter{w: stdout}
	var said strings.Builder
	status := run(out, io.MultiWriter(stderr, &said))
	if status != exitOK && out.n == 0 {
		writeFailureJSON(stdout, sessionOf(cmd, args), "", status, said.String())
	}
	return status
}

// sessionOf is the session key args name, as far as a failure JSON can
// tell: --session's value, info's argument, or the default; none for ls.
func sessionOf(cmd string, args []string) string {
	key := "default"
	switch cmd {
	case "ls":
		return ""
	case "info":
		key = ""
	}
	for i, a := range args {
		switch {
		case a == "--":
			return key
		case (a == "--session" || a == "-session") && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--session="), strings.HasPrefix(a, "-session="):
			_, v, _ := strings.Cut(a, "=")
			return v
		case cmd == "info" && !strings.HasPrefix(a, "-") && key == "":
			key = a
		}
	}
	return key
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// announceStart tells a person at a terminal that key has no session yet,
// so the second or two its sandbox takes to start is not a silent hang.
// Programs reading stderr (not a terminal) get nothing extra.
func announceStart(ctx context.Context, m interface {
	Info(context.Context, string, ...session.InfoOption) (session.Info, error)
}, key string, stderr io.Writer) {
	if f, ok := stderr.(*os.File); !ok || !isTerminal(f) {
		return
	}
	if _, err := m.Info(ctx, key); errors.Is(err, session.ErrNotFound) {
		fmt.Fprint(stderr, startNotice(key))
	}
}

// startNotice is what announceStart prints.
func startNotice(key string) string {
	return fmt.Sprintf("agentbox: starting session %s: a new sandbox, ready in a second or two\n", strconv.Quote(termsafe.Line(key)))
}
