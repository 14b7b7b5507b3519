package imagesetup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/docker"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// Labels of an image derived with extra Debian packages.
const (
	LabelExtraPackages = "io.agentbox.extra-packages" // the packages, sorted, space-separated
	LabelExtraHash     = "io.agentbox.extra-hash"     // ExtraHash of the packages and the base image
)

// debianPackageRE is Debian's package-name grammar.
var debianPackageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// ValidPackage reports whether name is a valid Debian package name.
func ValidPackage(name string) bool { return debianPackageRE.MatchString(name) }

// ExtraOptions says which derived image to make: Base with Packages added.
type ExtraOptions struct {
	Image    string   // tag of the derived image (what SANDBOX_IMAGE names)
	Base     string   // the sandbox image it derives from
	Packages []string // Debian packages to add
	Force    bool     // rebuild even when the image is current
	Out      io.Writer
}

// ExtraHash identifies a derived image: the sorted, deduplicated package
// list and the ID of the base image it was built on.
func ExtraHash(packages []string, baseID string) string {
	h := sha256.Sum256([]byte(strings.Join(sortedPackages(packages), " ") + "\n" + baseID))
	return hex.EncodeToString(h[:])
}

func sortedPackages(p []string) []string {
	s := slices.Clone(p)
	slices.Sort(s)
	return slices.Compact(s)
}

// ExtraDockerfile is the Dockerfile EnsureExtra builds: base plus packages
// from Debian's archive, installed as root, then back to the sandbox user.
func ExtraDockerfile(base string, packages []string) string {
	return "FROM " + base + "\n" +
		"USER 0:0\n" +
		"RUN apt-get -q -o Acquire::Check-Valid-Until=false update && DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends " +
		strings.Join(sortedPackages(packages), " ") +
		" && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin\n" +
		"USER 1000:1000\n"
}

// EnsureExtra makes Image current as Base plus Packages: it returns at once
// when Image was built with the same package list on the same base image
// (idempotent), and builds it otherwise, streaming the build's progress to
// Out. The derived image keeps the base's source-hash and protocol labels,
// so the session manager accepts it.
func EnsureExtra(ctx context.Context, cli *docker.Client, opts ExtraOptions) (Result, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	say := func(format string, args ...any) { fmt.Fprintf(opts.Out, format+"\n", args...) }
	start := time.Now()
	res := Result{Image: opts.Image, Base: opts.Base}
	if opts.Image == "" || opts.Base == "" || opts.Image == opts.Base {
		return res, fmt.Errorf("extra packages: need a derived image name distinct from the base (image %q, base %q)", opts.Image, opts.Base)
	}
	if len(opts.Packages) == 0 {
		return res, errors.New("extra packages: no packages given")
	}
	for _, p := range opts.Packages {
		if !ValidPackage(p) {
			return res, fmt.Errorf("extra packages: %q is not a Debian package name", p)
		}
	}
	pkgs := sortedPackages(opts.Packages)
	base, err := cli.InspectImage(ctx, opts.Base)
	if err != nil {
		return res, fmt.Errorf("extra packages: base image %s: %w", opts.Base, err)
	}
	want := ExtraHash(pkgs, base.ID)
	if img, err := cli.InspectImage(ctx, opts.Image); err == nil && img.Labels[LabelExtraHash] == want && !opts.Force {
		say("image %s is current (%s on %s); nothing to do", opts.Image, strings.Join(pkgs, " "), opts.Base)
		res.ID, res.Elapsed = img.ID, time.Since(start)
		return res, nil
	} else if err != nil && !errors.Is(err, docker.ErrNotFound) {
		return res, fmt.Errorf("extra packages: %w", err)
	}
	say("building %s: %s on %s, with Debian packages %s", opts.Image, opts.Image, opts.Base, strings.Join(pkgs, " "))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := []byte(ExtraDockerfile(opts.Base, pkgs))
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))}); err != nil {
		return res, err
	}
	if _, err := tw.Write(df); err != nil {
		return res, err
	}
	if err := tw.Close(); err != nil {
		return res, err
	}
	id, err := cli.BuildImage(ctx, &buf, docker.BuildSpec{
		Tags: []string{opts.Image},
		Labels: map[string]string{
			LabelExtraPackages:     strings.Join(pkgs, " "),
			LabelExtraHash:         want,
			sandboximage.LabelBase: opts.Base,
		},
	}, func(line string) { say("  %s", line) })
	if err != nil {
		return res, fmt.Errorf("extra packages: build %s: %w", opts.Image, err)
	}
	if st, err := Check(ctx, cli, opts.Image); err != nil || !st.Current {
		return res, fmt.Errorf("extra packages: %s does not carry current sandbox labels (base %s stale? run sandbox-setup without extra packages first): %v", opts.Image, opts.Base, err)
	}
	res.ID, res.Built, res.Elapsed = id, true, time.Since(start)
	say("image %s is ready (%s, built in %s)", opts.Image, abbrev(id), res.Elapsed.Round(time.Second))
	return res, nil
}
