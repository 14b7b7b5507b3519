package imagesetup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// DefaultSuite is the Debian suite of the base: the first one with python3-pyarrow.
const DefaultSuite = "forky"

// DefaultMirror is the Debian archive debootstrap and apt use.
const DefaultMirror = "http://deb.debian.org/debian"

// Options says which image to make and how.
type Options struct {
	Image       string // tag of the sandbox image (SANDBOX_IMAGE)
	Base        string // base image; "" picks one (see Ensure)
	Suite       string // Debian suite when bootstrapping; default DefaultSuite
	Mirror      string // Debian mirror when bootstrapping; default DefaultMirror
	NoPull      bool   // never try to pull a base image
	Debootstrap bool   // bootstrap a base even if one could be pulled
	Force       bool   // rebuild even when the image is current
	Out         io.Writer
}

func (o *Options) defaults() {
	if o.Suite == "" {
		o.Suite = DefaultSuite
	}
	if o.Mirror == "" {
		o.Mirror = DefaultMirror
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

func (o *Options) say(format string, args ...any) {
	fmt.Fprintf(o.Out, format+"\n", args...)
}

// Status describes the sandbox image as the engine has it.
type Status struct {
	Image      string
	Present    bool
	Current    bool   // built from exactly the embedded sources
	ID         string // image ID when present
	SourceHash string // label on the image
	WantHash   string // SourceHash of the embedded sources
	Protocol   int    // protocol label on the image (0 if none)
	// Foreign: present, with neither of agentbox's labels (protocol,
	// source hash): another program's image, such as debian:bookworm.
	Foreign bool
}

// ErrNotSandboxImage is what Ensure returns for an image that is present
// and not an agentbox sandbox image: building ours under its tag would
// take the name from another program's image.
var ErrNotSandboxImage = errors.New("not an agentbox sandbox image")

// Check reports whether image exists and was built from the embedded sources.
func Check(ctx context.Context, cli *docker.Client, image string) (Status, error) {
	st := Status{Image: image, WantHash: sandboximage.SourceHash()}
	img, err := cli.InspectImage(ctx, image)
	if errors.Is(err, docker.ErrNotFound) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	st.Present = true
	st.ID = img.ID
	st.SourceHash = img.Labels[sandboximage.LabelSourceHash]
	st.Protocol, _ = strconv.Atoi(img.Labels[sandboximage.LabelProtocol])
	st.Current = st.SourceHash == st.WantHash && st.Protocol == kernel.ProtocolVersion
	_, proto := img.Labels[sandboximage.LabelProtocol]
	_, hash := img.Labels[sandboximage.LabelSourceHash]
	st.Foreign = !proto && !hash
	return st, nil
}

// Result says what Ensure did.
type Result struct {
	Image   string
	ID      string
	Built   bool // false: the image was already current
	Base    string
	Elapsed time.Duration
}

// Ensure makes image current: it returns at once when an image built from the
// embedded sources exists, and builds it otherwise. The base image is, in
// order: Options.Base; a base this package bootstrapped earlier for the same
// package list; debian:<suite>-slim if present or pullable; a Debian base
// bootstrapped now on the host.
func Ensure(ctx context.Context, cli *docker.Client, opts Options) (Result, error) {
	opts.defaults()
	start := time.Now()
	res := Result{Image: opts.Image}
	if opts.Image == "" {
		return res, errors.New("ensure image: no image name given")
	}
	st, err := Check(ctx, cli, opts.Image)
	if err != nil {
		return res, fmt.Errorf("ensure image %s: %w", opts.Image, err)
	}
	if st.Current && !opts.Force {
		opts.say("image %s is current (sources %s, protocol %d); nothing to do", opts.Image, st.WantHash[:12], kernel.ProtocolVersion)
		res.ID = st.ID
		res.Elapsed = time.Since(start)
		return res, nil
	}
	if st.Foreign { // also with Force: the tag is another program's
		return res, fmt.Errorf("ensure image %s: %w (no label %s): sandbox-setup does not build over another image's tag; set SANDBOX_IMAGE (or --image) to a name of ours, such as agentbox-sandbox:latest",
			opts.Image, ErrNotSandboxImage, sandboximage.LabelProtocol)
	}
	switch {
	case !st.Present:
		opts.say("image %s is missing: building it", opts.Image)
	case opts.Force:
		opts.say("rebuilding image %s (forced)", opts.Image)
	default:
		opts.say("image %s is stale (built from sources %s, these are %s): rebuilding it", opts.Image, abbrev(st.SourceHash), st.WantHash[:12])
	}
	base, err := resolveBase(ctx, cli, &opts)
	if err != nil {
		return res, fmt.Errorf("ensure image %s: %w", opts.Image, err)
	}
	res.Base = base
	id, err := build(ctx, cli, &opts, base)
	if err != nil {
		return res, fmt.Errorf("ensure image %s: %w", opts.Image, err)
	}
	res.ID = id
	res.Built = true
	if err := smokeTest(ctx, cli, &opts); err != nil {
		return res, fmt.Errorf("ensure image %s: %w", opts.Image, err)
	}
	res.Elapsed = time.Since(start)
	opts.say("image %s is ready (%s, built in %s)", opts.Image, abbrev(id), res.Elapsed.Round(time.Second))
	return res, nil
}

// BootstrapTag is the tag of the base image Ensure bootstraps for suite.
func BootstrapTag(suite string) string {
	return "agentbox-base:" + suite + "-" + sandboximage.PackagesHash(suite)[:12]
}

func resolveBase(ctx context.Context, cli *docker.Client, opts *Options) (string, error) {
	present := func(ref string) bool {
		_, err := cli.InspectImage(ctx, ref)
		return err == nil
	}
	if opts.Base != "" {
		if present(opts.Base) {
			opts.say("base image %s: present", opts.Base)
			return opts.Base, nil
		}
		if opts.NoPull {
			return "", fmt.Errorf("base image %s is missing and pulling is off (--no-pull)", opts.Base)
		}
		opts.say("base image %s: pulling", opts.Base)
		if err := cli.PullImage(ctx, opts.Base, func(line string) { opts.say("  %s", line) }); err != nil {
			return "", fmt.Errorf("base image %s is missing and could not be pulled (%w); leave --base empty to bootstrap one with debootstrap", opts.Base, err)
		}
		return opts.Base, nil
	}
	boot := BootstrapTag(opts.Suite)
	if present(boot) && !opts.Debootstrap {
		opts.say("base image %s: present (bootstrapped earlier)", boot)
		return boot, nil
	}
	if !opts.Debootstrap {
		slim := "debian:" + opts.Suite + "-slim"
		if present(slim) {
			opts.say("base image %s: present", slim)
			return slim, nil
		}
		if !opts.NoPull {
			opts.say("base image %s: trying to pull it", slim)
			pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			err := cli.PullImage(pctx, slim, func(line string) { opts.say("  %s", line) })
			cancel()
			if err == nil {
				return slim, nil
			}
			opts.say("base image %s cannot be pulled (%v)", slim, err)
		}
	}
	opts.say("bootstrapping a Debian %s base with debootstrap on this host (about two minutes)", opts.Suite)
	if err := Bootstrap(ctx, cli, boot, opts.Suite, opts.Mirror, opts.Out); err != nil {
		return "", err
	}
	return boot, nil
}

func build(ctx context.Context, cli *docker.Client, opts *Options, base string) (string, error) {
	tarball, err := sandboximage.BuildContext()
	if err != nil {
		return "", fmt.Errorf("build context: %w", err)
	}
	opts.say("building %s on %s", opts.Image, base)
	return cli.BuildImage(ctx, bytes.NewReader(tarball), docker.BuildSpec{
		Tags:      []string{opts.Image},
		BuildArgs: map[string]string{"BASE_IMAGE": base},
		Labels: map[string]string{
			sandboximage.LabelProtocol:   strconv.Itoa(kernel.ProtocolVersion),
			sandboximage.LabelSourceHash: sandboximage.SourceHash(),
			sandboximage.LabelBase:       base,
		},
	}, func(line string) { opts.say("  %s", line) })
}

// smokeTest runs the image once the way sessions run it (locked down, no
// network) and imports every library the image promises.
func smokeTest(ctx context.Context, cli *docker.Client, opts *Options) error {
	opts.say("checking the image: importing numpy, pandas, pyarrow, matplotlib, scipy, sklearn")
	code := "import numpy, pandas, pyarrow, matplotlib, scipy, sklearn, io\n" +
		"df = pandas.DataFrame({'a': [1, 2]}); buf = io.BytesIO(); df.to_parquet(buf)\n" +
		"assert pandas.read_parquet(io.BytesIO(buf.getvalue()))['a'].sum() == 3\n" +
		"print('python', __import__('sys').version.split()[0], 'pandas', pandas.__version__, 'pyarrow', pyarrow.__version__)"
	out, err := RunOnce(ctx, cli, opts.Image, []string{"python3", "-c", code})
	if err != nil {
		return fmt.Errorf("smoke test: %w", err)
	}
	opts.say("  %s", strings.TrimSpace(out))
	return nil
}

// RunOnce runs cmd in a throwaway, locked-down container of image (entrypoint
// replaced) and returns its standard output; a non-zero exit is an error that
// carries standard error.
func RunOnce(ctx context.Context, cli *docker.Client, image string, cmd []string) (string, error) {
	spec := LockedDown(image)
	spec.Entrypoint = cmd
	// No init here to drop privileges: the command runs as the sandbox
	// user directly, as code in a session would.
	spec.User, spec.CapAdd = "1000:1000", nil
	return runSpec(ctx, cli, spec)
}

// runSpec runs a throwaway container of spec to its end and returns its
// standard output, as RunOnce.
func runSpec(ctx context.Context, cli *docker.Client, spec docker.ContainerSpec) (string, error) {
	cmd := spec.Entrypoint
	spec.Labels = map[string]string{"io.agentbox.throwaway": "1"}
	id, err := cli.CreateContainer(ctx, spec)
	if err != nil {
		return "", err
	}
	defer cli.RemoveContainer(context.WithoutCancel(ctx), id)
	code, err := cli.Wait(ctx, id)
	if err != nil {
		return "", err
	}
	stdout, stderr, err := cli.Logs(ctx, id)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return stdout, fmt.Errorf("%s exited with code %d: %s", strings.Join(cmd[:1], " "), code, strings.TrimSpace(lastLines(stderr, 5)))
	}
	return stdout, nil
}

// LockedDown is the container shape sessions use, for checks and tests,
// with agentbox's seccomp profile (SANDBOX_SECCOMP's default).
func LockedDown(image string) docker.ContainerSpec {
	return docker.ContainerSpec{
		Image:           image,
		User:            sandboximage.InitUser,
		Env:             []string{sandboximage.UserEnv + "=1000:1000", "AGENTBOX_MEMORY_LIMIT=" + strconv.Itoa(512<<20)}, // MemoryBytes, for the init's memory watchdog
		WorkingDir:      "/",
		NetworkMode:     "none",
		ReadOnlyRoot:    true,
		Tmpfs:           map[string]string{"/tmp": "rw,nosuid,nodev,size=64m", "/session": "rw,nosuid,nodev,size=64m,uid=1000,gid=1000"},
		MemoryBytes:     512 << 20,
		NoSwap:          true,
		NanoCPUs:        1e9,
		PidsLimit:       128,
		CapDropAll:      true,
		CapAdd:          sandboximage.InitCapabilities(),
		NoNewPrivileges: true,
		Seccomp:         string(sandboximage.SeccompProfile()),
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func abbrev(s string) string {
	s = strings.TrimPrefix(s, "sha256:")
	if len(s) > 12 {
		return s[:12]
	}
	if s == "" {
		return "(none)"
	}
	return s
}
