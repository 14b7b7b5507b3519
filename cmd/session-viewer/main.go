// Command session-viewer is a debug view of agentbox sessions.
//
//	session-viewer [--json]                       list the sessions
//	session-viewer [flags] KEY                    one session, from the history database
//	session-viewer [flags] --dir SESSIONS_ROOT/ID one BIND session folder, no database or engine
//
// It reads the history database every manager writes (ARTIFACTS_DB) and,
// when the engine is reachable, adds the live state of the session's
// container. See usage for the flags and exit codes.
package main

import (
	"cmp"
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
	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/session"
)

// Exit codes.
const (
	exitOK       = 0
	exitNotFound = 1 // no such session
	exitUsage    = 2 // bad command line or configuration
	exitSystem   = 3 // the engine (when it mattered) or the history database failed
)

// namespaceEnv is the setting of the namespace whose sessions are shown
// (config.Config.Namespace), as for cmd/agentbox and a backend.
const namespaceEnv = "AGENTBOX_NAMESPACE"

// pollInterval is how often --follow looks for new executions.
const pollInterval = 500 * time.Millisecond

// engineTimeout bounds reaching the engine, so an unreachable one only
// delays the view, never blocks it.
const engineTimeout = 15 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the parsed command line.
type options struct {
	dir         string
	limit       int
	json        bool
	follow      bool
	noState     bool
	noArtifacts bool
	key         string
}

// run is the whole program with its inputs and outputs passed in; it
// returns the exit status.
func run(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("session-viewer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.dir, "dir", "", "")
	fs.IntVar(&o.limit, "limit", 20, "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.BoolVar(&o.follow, "follow", false, "")
	fs.BoolVar(&o.noState, "no-state", false, "")
	fs.BoolVar(&o.noArtifacts, "no-artifacts", false, "")
	// Flags may come after the key too.
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage(stdout)
				return exitOK
			}
			fmt.Fprintf(stderr, "session-viewer: %v (see session-viewer -h)\n", err)
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(rest) > 1:
		fmt.Fprintf(stderr, "session-viewer: one session key at most, got %d arguments\n", len(rest))
		return exitUsage
	case len(rest) == 1 && o.dir != "":
		fmt.Fprintln(stderr, "session-viewer: give a KEY or --dir, not both")
		return exitUsage
	case o.limit < 0:
		fmt.Fprintln(stderr, "session-viewer: --limit must be 0 (all) or more")
		return exitUsage
	}
	if len(rest) == 1 {
		o.key = rest[0]
	}
	out := newPrinter(stdout)
	if o.dir != "" {
		return viewDir(ctx, o, out, stderr)
	}
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintf(stderr, "session-viewer: configuration: %s\n", oneLine(err))
		return exitUsage
	}
	cfg.PoolSize = 0
	ns := cmp.Or(cfg.Namespace, session.DefaultNamespace)
	if o.key == "" {
		if o.follow {
			fmt.Fprintln(stderr, "session-viewer: --follow needs a KEY or --dir")
			return exitUsage
		}
		return listSessions(ctx, cfg, ns, o, out, stderr)
	}
	return viewKey(ctx, cfg, ns, o, out, stderr)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: session-viewer [flags] [KEY]
       session-viewer [flags] --dir SESSIONS_ROOT/<session-id>

Without KEY or --dir, lists the sessions of the namespace (history database,
plus the containers' live state when the engine is reachable). With KEY,
shows that session: metadata, execution history, Python state, datasets and
artifacts (with fresh signed download URLs). With --dir, reads a BIND session
folder (session_metadata.json, session.log, python_state.json,
cache_datasets.json) and needs neither database nor engine. The records sit
beside workspace/, the sandbox's /session; in a folder without workspace/
(the older layout) the sandbox could have written them, which the view says.
Links, named pipes and other non-regular files at a record's name are
refused, never read through.

flags:
  --dir DIR        a BIND session folder to read instead of the database
  --limit N        show the last N executions (default 20; 0: all)
  --json           print one JSON object instead of text
  --follow         keep printing new executions as they are recorded (Ctrl-C stops)
  --no-state       do not show the Python state
  --no-artifacts   do not show artifacts (nor sign their URLs)

exit status:
  0  done
  1  no such session
  2  usage or configuration error
  3  the history database could not be read, or the engine failed where it
     was needed (the session runs but its state could not be read)

environment (also read from ./.env): AGENTBOX_NAMESPACE (the sessions of
which namespace, default agentbox: the backend's), ARTIFACTS_DB,
SESSIONS_ROOT, ARTIFACT_PUBLIC_URL, ARTIFACT_TOKEN_TTL_S, DOCKER_HOST.
`)
}

// oneLine joins the lines of an error into one and escapes the rest of
// what a terminal could act on: an error may quote a file name, or a
// record, the sandbox wrote.
func oneLine(err error) string {
	return termsafe.Line(strings.ReplaceAll(err.Error(), "\n", "; "))
}
