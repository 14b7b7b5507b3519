package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/session"
)

// Exit statuses of `agentbox sh` that are not the command's own, as
// docker run and timeout(1) have them, since the command may exit with
// any of 1, 2 and 3 itself.
const (
	shFailed   = 125 // agentbox could not run it: usage, configuration, sandbox
	shNoStart  = 126 // the command could not start: its folder is missing or closed
	shTimedOut = 124 // its timeout killed it
)

// runSh is `agentbox sh [flags] -- CMD...`: run a shell command in a
// session's container, beside its Python kernel, and exit with its status.
func runSh(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sh")
	key := fs.String("session", "default", "")
	asJSON := fs.Bool("json", false, "")
	raw := fs.Bool("raw", false, "")
	cwd := fs.String("cwd", "", "")
	var env envFlag
	fs.Var(&env, "env", "")
	var timeout durationFlag
	fs.Var(&timeout, "timeout", "")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		if status == exitUsage {
			status = shFailed
		}
		return status
	}
	var said strings.Builder
	failed := func(status int) int {
		if *asJSON {
			writeFailureJSON(stdout, *key, "", status, said.String())
		}
		return status
	}
	if *asJSON {
		stderr = io.MultiWriter(stderr, &said)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "agentbox: sh: no command (agentbox sh [flags] -- CMD...)")
		return failed(shFailed)
	}
	cmd := session.Command{Line: commandLine(fs.Args()), Cwd: *cwd, Env: env.m, Timeout: time.Duration(timeout)}
	// Ctrl-C ends ctx: the command and what it started are killed, and
	// what it printed is still shown.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	m, status := openManager(ctx, stderr)
	if m == nil {
		return failed(shStatus(status))
	}
	defer closeManager(ctx, m, stderr)
	var escapers []*termsafe.Writer
	if !*asJSON {
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if !*raw {
			o, e := termsafe.NewWriter(stdout), termsafe.NewWriter(stderr)
			cmd.Stdout, cmd.Stderr, escapers = o, e, []*termsafe.Writer{o, e}
		}
	}
	announceStart(ctx, m, *key, stderr)
	res, err := m.Run(ctx, *key, cmd)
	for _, w := range escapers {
		w.Flush()
	}
	if err != nil {
		var ce *session.CommandError
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "agentbox: sh: %s\n", oneLine(err))
			return failed(shNoStart)
		}
		if errors.Is(err, session.ErrInvalidCommand) {
			fmt.Fprintf(stderr, "agentbox: sh: %s\n", oneLine(err))
			return failed(shFailed)
		}
		return failed(shStatus(failure(ctx, stderr, err)))
	}
	if *asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox: sh: encode result: %s\n", oneLine(err))
			return failed(shFailed)
		}
		fmt.Fprintf(stdout, "%s\n", termsafe.JSON(b))
	} else if res.TimedOut {
		fmt.Fprintf(stderr, "agentbox: sh: timed out: the command and every process it started were killed (SIGTERM, then SIGKILL after INTERRUPT_GRACE_S); it ran %s\n", res.Duration.Round(time.Millisecond))
	}
	switch {
	case res.TimedOut:
		return shTimedOut
	case res.Interrupted:
		return exitInterrupted
	}
	return res.ExitCode
}

// shStatus maps the other commands' failure statuses onto sh's, which
// keeps the small numbers for the command.
func shStatus(status int) int {
	if status == exitInterrupted {
		return status
	}
	return shFailed
}

// commandLine is what bash runs: one argument is a command line as it is
// (pipes, redirections, $VARS work); several are a program and its
// arguments, each quoted, as docker exec takes them.
func commandLine(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// envFlag is a repeated --env NAME=VALUE.
type envFlag struct{ m map[string]string }

func (e *envFlag) String() string { return "" }

func (e *envFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want NAME=VALUE")
	}
	if e.m == nil {
		e.m = map[string]string{}
	}
	e.m[k] = v
	return nil
}
