// Command agentbox runs Python code in agentbox sessions from a shell, for a
// person trying the sandbox out or an agent driving it through a shell tool.
//
//	agentbox exec [--session KEY] [--timeout 30s] [--id EXEC_ID] [--json] [--quiet] [CODE | -]
//	agentbox repl [--session KEY]
//	agentbox ls [--json]
//	agentbox stop KEY | --all
//	agentbox cp SRC DST          (one side KEY:PATH; - is a tar stream)
//	agentbox files [--session KEY] [--json] [-r] [PATH]
//	agentbox sh [--session KEY] [--timeout D] [--json] -- CMD...
//	agentbox pause KEY | resume KEY | renew KEY DURATION | info KEY [--json]
//
// Every invocation is a new process: it reattaches to the session's running
// container, so variables and imports persist from one invocation to the
// next, and it leaves the container running when it exits. See usage for
// the exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/telemetry"
	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1   // the code raised (or timed out), or stop found no such session
	exitUsage       = 2   // bad command line or configuration
	exitSandbox     = 3   // the sandbox failed: engine, image, container or kernel
	exitInterrupted = 130 // Ctrl-C before the code started, as shells report SIGINT
)

// namespaceEnv is the setting of the namespace whose sessions the command
// sees (config.Config.Namespace), the same one a backend's Manager reads:
// tests set it to keep their sessions apart.
const namespaceEnv = "AGENTBOX_NAMESPACE"

// closeTimeout bounds closing the manager, which runs even after Ctrl-C.
const closeTimeout = 30 * time.Second

func main() {
	// SIGINT is left to the commands: exec turns it into an interrupt of the
	// running code, repl into clearing the input line.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program with its inputs and outputs passed in, so tests
// can call it in-process; it returns the exit status. Tracing is set up here
// by the OTEL_* variables (off by default), and the spans still buffered
// are flushed before it returns, so that a test covers what main does.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flush := telemetry.Start(ctx, "agentbox", stderr)
	defer flush()
	return command(ctx, args, stdin, stdout, stderr)
}

// command runs the command args name.
func command(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	if jsonCommands[cmd] && wantsJSON(rest) {
		return jsonAlways(cmd, rest, stdout, stderr, func(stdout, stderr io.Writer) int {
			return dispatch(ctx, cmd, rest, stdin, stdout, stderr)
		})
	}
	return dispatch(ctx, cmd, rest, stdin, stdout, stderr)
}

// dispatch runs the command cmd with its arguments.
func dispatch(ctx context.Context, cmd string, rest []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch cmd {
	case "exec":
		return runExec(ctx, rest, stdin, stdout, stderr)
	case "repl":
		return runRepl(ctx, rest, stdin, stdout, stderr)
	case "ls":
		return runLs(ctx, rest, stdout, stderr)
	case "stop":
		return runStop(ctx, rest, stdout, stderr)
	case "cp":
		return runCp(ctx, rest, stdin, stdout, stderr)
	case "files":
		return runFiles(ctx, rest, stdout, stderr)
	case "sh":
		return runSh(ctx, rest, stdout, stderr)
	case "pause":
		return runPause(ctx, rest, stdout, stderr)
	case "resume":
		return runResume(ctx, rest, stdout, stderr)
	case "renew":
		return runRenew(ctx, rest, stdout, stderr)
	case "info":
		return runInfo(ctx, rest, stdout, stderr)
	case "serve":
		return runServe(ctx, rest, stdout, stderr)
	case "mcp":
		return runMCP(ctx, rest, stdin, stdout, stderr)
	case "tenant":
		return runTenant(rest, stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			return commandHelp(ctx, rest[0], stdout, stderr)
		}
		usage(stdout)
		return exitOK
	}
	if strings.HasPrefix(cmd, "-") {
		fmt.Fprintf(stderr, "agentbox: flag %s before a command (see agentbox help)\n", cmd)
	} else {
		fmt.Fprintf(stderr, "agentbox: unknown command %q (see agentbox help)\n", cmd)
	}
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: agentbox COMMAND [flags]

Runs Python in agentbox sessions: one sandbox container per session key, whose
variables and imports persist from one command to the next.

commands:
  exec [flags] [CODE | -]   run CODE (or standard input, when CODE is - or absent)
      --session KEY         session to run in (default "default"; created if needed)
      --timeout D           interrupt the code after D, such as 30s or 2m (default EXEC_TIMEOUT_S)
      --id EXEC_ID          execution id: repeating an id prints the recorded result
                            without running the code again
      --json                print the result as one JSON object and nothing else on stdout;
                            when the code could not run (exit 2, 3, 130) the object is
                            {"session", "id", "error": {"kind", "message"}}
      --quiet               do not list the artifacts the code wrote (by default the
                            first 5 are listed with their download URLs, the rest counted)
      --env NAME=VALUE      environment variable of the session, if this call creates it
                            (repeatable; visible to its code only)
      --label NAME=VALUE    metadata label of the session, if this call creates it (repeatable)
      --ttl D               time to live of the session, if this call creates it, such
                            as 30m (default SESSION_TTL_S; renew extends it)
      --on-idle ACTION      what the idle timeout does to the session, if this call
                            creates it: stop (remove it) or pause (freeze it; its next
                            call resumes it) (default IDLE_ACTION)
      --raw                 print the code's output as it is, escape sequences included
                            (by default they are shown escaped, such as \x1b for ESC, so
                            that the sandbox cannot act on your terminal)
  repl [--session KEY]      interactive prompt; Ctrl-C interrupts the running code
                            (state is kept) or clears the input, Ctrl-D exits; at a
                            terminal, line editing and history (arrows, Ctrl-R), kept
                            in ~/.agentbox_history (AGENTBOX_HISTORY: another file,
                            or empty for none); Python decides when input is complete
  ls [--json]               list the sessions: key, id, container, state, age, idle, memory
  stop KEY | --all          stop one session, or every session, removing its container
  cp SRC DST                copy files and folders into or out of a session, as the
                            sandbox user: one side is KEY:PATH (PATH relative to
                            /session unless absolute), the other a local path, or -
                            for a tar stream on stdin (into the folder KEY:PATH) or
                            stdout; links and special files in folders are skipped
  files [flags] [PATH]      list a folder of a session (default /session)
      --session KEY         the session (default "default")
      -r                    recursively
      --json                one JSON object: {path, entries: [{path, type, size,
                            mode, mtime, target}], truncated}
  sh [flags] -- CMD...      run a shell command (bash) in the session's container, beside
                            its Python (which it neither waits for nor disturbs), as the
                            sandbox user; one CMD argument is a command line as it is,
                            several a program and its arguments; exits with its status
      --session KEY         session to run in (default "default"; created if needed)
      --timeout D           kill the command, and every process it started, after D
                            (default EXEC_TIMEOUT_S); exit 124
      --cwd DIR             folder to run in (default /session)
      --env NAME=VALUE      add to its environment (repeatable)
      --json                print one JSON object: exit_code, stdout, stderr,
                            duration_ms, timed_out (and session, id, interrupted)
      --raw                 print its output as it is, escape sequences included
                            sh exits 125 when agentbox failed (usage, sandbox), 126 when
                            the command could not start (no such folder), 130 on Ctrl-C
  pause KEY                 freeze a session: its processes stop, its memory (the Python
                            state) is kept; exec on it fails until resume
  resume KEY                thaw a paused session, its state intact
  renew KEY DURATION        the session expires DURATION (such as 30m) from now
  info KEY [--json]         state (running, paused, stopped, lost), times, expiry,
                            executions, memory, limits, image and labels of a session
  serve                     serve sessions over HTTP: OpenSandbox's API, agentbox's own
                            and MCP (see agentbox serve --help)
  mcp                       serve sessions to an MCP client over stdio (see agentbox mcp --help)
  tenant                    the tenant id of each API key on standard input (one a
                            line): agentbox ls shows a served session as TENANT/NAME
  help [COMMAND]            show this help, or one command's

exit status:
  0  the code ran without raising (ls, stop, pause, resume, renew, info: done)
  1  the code raised an exception or timed out; stop, pause, resume, renew,
     info: no such session; cp, files: no such file or session, permission
     denied, a cap (FILES_MAX_FILE_MB, FILES_MAX_CALL_MB), a full /session,
     a paused session
  2  usage or configuration error, an --id reused for other code, or a
     session option refused (--env, --label, --ttl, --on-idle)
  3  the sandbox failed: engine unreachable, image missing or stale (run
     sandbox-setup), session lost, or another system error
  130 interrupted by Ctrl-C before the code started

environment (also read from ./.env; see example.env for all):
  AGENTBOX_NAMESPACE   whose sessions: the namespace of the backend to poke
                       (default agentbox; containers are <namespace>_<session id>)
  SANDBOX_IMAGE        sandbox image (default agentbox-sandbox:latest)
  EXEC_TIMEOUT_S       default timeout of one execution (default 120)
  IDLE_TIMEOUT_S       idle sessions are removed after this (default 2700)
  SESSION_STORAGE      TMPFS or BIND (default TMPFS)
  SESSIONS_ROOT        session folders in BIND mode (default ./sessions)
  ARTIFACTS_DB         history database, used for --id replays (default ./artifacts.db)
  SANDBOX_MEMORY_MB, SANDBOX_CPUS, SANDBOX_NETWORK   container limits
  FILES_MAX_FILE_MB    largest file cp moves (default 1024)
  FILES_MAX_CALL_MB    most bytes one cp into a session carries (default 2048)
  DOCKER_HOST          the Docker engine to use
`)
}

// newFlags returns a flag set that reports errors through run, as one line,
// instead of printing the flag package's own message and defaults.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("agentbox "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args, returning the exit status to stop with when the
// command should not go on (help asked for, or a bad flag).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (int, bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, true
	}
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(stdout, strings.TrimPrefix(fs.Name(), "agentbox "))
		return exitOK, false
	}
	fmt.Fprintf(stderr, "agentbox: %s: %v (see agentbox help)\n", strings.TrimPrefix(fs.Name(), "agentbox "), err)
	return exitUsage, false
}

// openManager loads the configuration and starts a manager for this
// process. On failure it has printed why and returns the exit status.
func openManager(ctx context.Context, stderr io.Writer) (*session.Manager, int) {
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintf(stderr, "agentbox: configuration: %s\n", oneLine(err))
		return nil, exitUsage
	}
	for _, note := range cfg.Notes { // LangGraph-Sandbox settings read otherwise or not needed
		fmt.Fprintf(stderr, "agentbox: note: %s\n", note)
	}
	// A short-lived process must not start warm containers: it would only
	// remove them again on Close.
	cfg.PoolSize = 0
	m, err := session.NewManager(ctx, cfg) // the namespace is AGENTBOX_NAMESPACE's, as a backend's
	if err != nil {
		return nil, failure(ctx, stderr, err)
	}
	return m, exitOK
}

// closeManager releases the manager without stopping its sessions, even
// after Ctrl-C, so the next invocation finds them.
func closeManager(ctx context.Context, m *session.Manager, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		fmt.Fprintf(stderr, "agentbox: close: %s\n", oneLine(err))
	}
}

// failure prints a Go error from the manager as one line with a hint at the
// fix, and returns its exit status.
func failure(ctx context.Context, stderr io.Writer, err error) int {
	msg := oneLine(err)
	code := exitSandbox
	switch {
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "agentbox: interrupted")
		return exitInterrupted
	case errors.Is(err, config.ErrInvalid):
		code = exitUsage
	case errors.Is(err, session.ErrInvalidKey), errors.Is(err, session.ErrInvalidOption),
		errors.Is(err, session.ErrAboveMaximum), errors.Is(err, session.ErrImageNotAllowed):
		code = exitUsage
	case errors.Is(err, session.ErrImageMissing), errors.Is(err, session.ErrImageStale):
		if !strings.Contains(msg, "sandbox-setup") {
			msg += ": run sandbox-setup"
		}
	case errors.Is(err, kernel.ErrIDConflict):
		code = exitUsage // the caller reused an execution id for other code
		msg += " (an --id names one execution: give other code a new one)"
	case errors.Is(err, session.ErrSessionLost):
		msg += " (the next command starts a fresh session)"
	}
	fmt.Fprintf(stderr, "agentbox: %s\n", msg)
	return code
}

// oneLine joins the lines of an error (errors.Join puts one cause per line)
// so that every message is one line on stderr, and escapes the rest of what
// a terminal could act on: an error may quote a file name or a message the
// sandbox wrote.
func oneLine(err error) string {
	return termsafe.Line(strings.ReplaceAll(err.Error(), "\n", "; "))
}
