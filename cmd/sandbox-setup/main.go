// Command sandbox-setup builds the agentbox sandbox image from the sources
// embedded in it, and checks that a host can run sandboxes.
//
//	sandbox-setup            build the image if it is missing or stale
//	sandbox-setup --check    report on the engine, the image and the security options
//	sandbox-setup --extra-packages python3-statsmodels,python3-seaborn
//	                         also add Debian packages (or SANDBOX_EXTRA_PACKAGES)
//
// With extra packages, SANDBOX_IMAGE (or --image) names the derived image
// sessions run, and the sandbox image it derives from is tagged as it with
// "-base" added to the tag (agentbox-sandbox:latest-base), or --sandbox-base.
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
	"strings"
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
		extra     = fs.String("extra-packages", "", "comma-separated Debian packages to add to the image, such as python3-statsmodels,python3-seaborn (default: SANDBOX_EXTRA_PACKAGES)")
		coreImage = fs.String("sandbox-base", "", "with extra packages, the tag of the sandbox image they are added to (default: the image's tag with -base added)")
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
	packages := cfg.ExtraPackages
	if *extra != "" {
		packages = nil
		for _, p := range strings.Split(*extra, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if !imagesetup.ValidPackage(p) {
				fmt.Fprintf(stderr, "sandbox-setup: --extra-packages: %q is not a Debian package name (want names matching ^[a-z0-9][a-z0-9+.-]+$)\n", p)
				return exitUsage
			}
			packages = append(packages, p)
		}
	}
	target := *image
	if len(packages) > 0 && !*check {
		if *coreImage == "" {
			*coreImage = BaseTag(target)
		}
		if *coreImage == "" || *coreImage == target {
			fmt.Fprintf(stderr, "sandbox-setup: cannot name the base of %s; give --sandbox-base\n", target)
			return exitUsage
		}
		*image = *coreImage
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
	if len(packages) > 0 {
		xres, err := imagesetup.EnsureExtra(ctx, cli, imagesetup.ExtraOptions{
			Image:    target,
			Base:     *image,
			Packages: packages,
			Force:    *force,
			Out:      out,
		})
		if err != nil {
			fmt.Fprintf(stderr, "sandbox-setup: %v\n", err)
			return exitProblem
		}
		res.Image, res.Built = xres.Image, res.Built || xres.Built
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

// BaseTag is the tag of the sandbox image extra packages are added to: image
// with "-base" added to its tag ("latest" when it has none); "" for a
// reference by digest.
func BaseTag(image string) string {
	if strings.Contains(image, "@") {
		return ""
	}
	repo, tag := image, "latest"
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo, tag = image[:i], image[i+1:]
	}
	return repo + ":" + tag + "-base"
}
