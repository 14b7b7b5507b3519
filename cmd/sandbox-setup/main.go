// Command sandbox-setup builds the agentbox sandbox image from the sources
// embedded in it, and checks that a host can run sandboxes.
//
//	sandbox-setup            build the image if it is missing or stale
//	sandbox-setup --check    report on the engine, the image and the security options
//
// It needs no checkout and no registry: when no Debian base image can be found
// or pulled, it bootstraps one with debootstrap (run as root).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/imagesetup"
)

// Exit codes.
const (
	exitOK       = 0
	exitProblem  = 1 // the image could not be built, or --check found a problem
	exitUsage    = 2 // bad flags or configuration
	exitNoEngine = 3 // no Docker engine reachable
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox-setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		check     = fs.Bool("check", false, "check the engine, the image and the security options instead of building")
		image     = fs.String("image", "", "image to build (default: SANDBOX_IMAGE from the environment or .env)")
		base      = fs.String("base", "", "base image to build on (default: bootstrapped or debian:<suite>-slim)")
		suite     = fs.String("suite", imagesetup.DefaultSuite, "Debian suite to bootstrap when no base image is available")
		mirror    = fs.String("mirror", imagesetup.DefaultMirror, "Debian mirror for debootstrap and apt")
		noPull    = fs.Bool("no-pull", false, "never try to pull a base image from a registry")
		bootstrap = fs.Bool("debootstrap", false, "bootstrap the base with debootstrap, installing packages on the host (for engines whose build containers have no network)")
		force     = fs.Bool("force", false, "rebuild even if the image is current")
		quiet     = fs.Bool("quiet", false, "print only errors and the final line")
		envFile   = fs.String("env-file", ".env", "dotenv file to read settings from, if it exists")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sandbox-setup [flags]\n\nBuilds the agentbox sandbox image (or, with --check, diagnoses the host).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sandbox-setup: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	cfg, err := config.LoadFile(*envFile)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-setup: configuration: %v\n", err)
		return exitUsage
	}
	if *image == "" {
		*image = cfg.SandboxImage
	}
	cli, err := docker.New()
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-setup: %v\n", err)
		return exitNoEngine
	}
	defer cli.Close()

	if *check {
		return doctor(ctx, cli, cfg, *image, stdout, stderr)
	}
	if _, err := cli.Info(ctx); err != nil {
		fmt.Fprintf(stderr, "sandbox-setup: %v\n", err)
		return exitNoEngine
	}
	out := stdout
	if *quiet {
		out = io.Discard
	}
	res, err := imagesetup.Ensure(ctx, cli, imagesetup.Options{
		Image:       *image,
		Base:        *base,
		Suite:       *suite,
		Mirror:      *mirror,
		NoPull:      *noPull,
		Debootstrap: *bootstrap,
		Force:       *force,
		Out:         out,
	})
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-setup: %v\n", err)
		if errors.Is(err, docker.ErrUnreachable) {
			return exitNoEngine
		}
		return exitProblem
	}
	if *quiet {
		if res.Built {
			fmt.Fprintf(stdout, "built %s\n", res.Image)
		} else {
			fmt.Fprintf(stdout, "%s is current\n", res.Image)
		}
	}
	return exitOK
}
