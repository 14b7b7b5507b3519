// Command artifact-server serves artifact downloads, and collects the blobs
// no artifact needs any more.
//
//	artifact-server [flags] [serve]       serve GET /artifacts/{id}?token=... on ARTIFACT_SERVER_ADDR
//	artifact-server [flags] gc [flags]    remove unreferenced blobs from BLOBSTORE_DIR
//
// Settings come from the environment and a .env file (see example.env):
// ARTIFACTS_DB, BLOBSTORE_DIR, ARTIFACT_SERVER_ADDR, ARTIFACT_TOKEN_TTL_S and
// ARTIFACT_TOKEN_SECRET. Without a configured secret, the one generated next
// to the database is used (and made if missing), the same file the process
// that signs download URLs uses.
//
// serve stops on SIGINT or SIGTERM, letting downloads in flight finish for
// up to 30 seconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/telemetry"
)

// Exit codes, as sandbox-setup's.
const (
	exitOK      = 0
	exitProblem = 1 // the server or the collection failed
	exitUsage   = 2 // bad arguments or configuration
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	flush := telemetry.Start(ctx, "artifact-server", os.Stderr) // OTEL_* variables; off by default
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	flush()
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("artifact-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envFile := fs.String("env-file", ".env", "dotenv file to read settings from, if it exists")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: artifact-server [flags] [serve]\n"+
			"       artifact-server [flags] gc [gc flags]\n\n"+
			"serve (the default) serves artifact downloads on ARTIFACT_SERVER_ADDR;\n"+
			"gc removes blobs no artifact refers to (see artifact-server gc -h).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	cmd, rest := "serve", fs.Args()
	if len(rest) > 0 {
		cmd, rest = rest[0], rest[1:]
	}
	switch cmd {
	case "serve":
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "artifact-server: serve takes no arguments, got %q\n", rest[0])
			return exitUsage
		}
	case "gc":
	default:
		fmt.Fprintf(stderr, "artifact-server: unknown command %q (want serve or gc)\n", cmd)
		return exitUsage
	}

	cfg, err := config.LoadFile(*envFile)
	if err != nil {
		fmt.Fprintf(stderr, "artifact-server: configuration: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if cmd == "gc" {
		return gc(ctx, cfg, rest, stdout, stderr)
	}
	return serve(ctx, cfg, log, stdout, stderr)
}
