package imagesetup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/docker"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// ErrCannotBootstrap means this host cannot bootstrap a Debian base; the error
// says what is missing.
var ErrCannotBootstrap = errors.New("cannot bootstrap a Debian base on this host")

// Bootstrap makes a Debian base image named tag on the host: debootstrap a
// minimal root filesystem of suite, install the sandbox's packages into it
// with apt inside a chroot (the host's network, not a build container's), and
// import it into the engine. It needs root and debootstrap.
func Bootstrap(ctx context.Context, cli *docker.Client, tag, suite, mirror string, out io.Writer) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: debootstrap needs root; run sandbox-setup as root, or give a base image with --base", ErrCannotBootstrap)
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("%w: debootstrap is not installed; install it with: apt-get install -y debootstrap", ErrCannotBootstrap)
	}
	script, err := debootstrapScript(suite)
	if err != nil {
		return err
	}
	parent := "/var/tmp"
	if _, err := os.Stat(parent); err != nil {
		parent = ""
	}
	root, err := os.MkdirTemp(parent, "agentbox-rootfs-")
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	defer os.RemoveAll(root)

	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	say("debootstrap %s into %s", suite, root)
	if err := run(ctx, out, "debootstrap", "--variant=minbase", suite, root, mirror, script); err != nil {
		return fmt.Errorf("bootstrap %s: debootstrap: %w", suite, err)
	}
	if resolv, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		if err := os.WriteFile(filepath.Join(root, "etc/resolv.conf"), resolv, 0o644); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	pkgs := sandboximage.Packages()
	say("installing %d packages into the root filesystem: %s", len(pkgs), strings.Join(pkgs, " "))
	apt := "apt-get -q -o Acquire::Check-Valid-Until=false"
	script2 := apt + " update && DEBIAN_FRONTEND=noninteractive " + apt + " install -y --no-install-recommends " + strings.Join(pkgs, " ") +
		" && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin"
	if err := run(ctx, out, "chroot", root, "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "sh", "-c", script2); err != nil {
		return fmt.Errorf("bootstrap %s: install packages: %w", suite, err)
	}
	// The engine provides these per container.
	_ = os.WriteFile(filepath.Join(root, "etc/resolv.conf"), nil, 0o644)
	_ = os.WriteFile(filepath.Join(root, "etc/hostname"), nil, 0o644)

	say("importing the root filesystem as %s", tag)
	tar := exec.CommandContext(ctx, "tar", "--numeric-owner", "--xattrs", "-C", root, "-cf", "-", ".")
	pipe, err := tar.StdoutPipe()
	if err != nil {
		return fmt.Errorf("bootstrap: tar: %w", err)
	}
	var tarErr strings.Builder
	tar.Stderr = &tarErr
	if err := tar.Start(); err != nil {
		return fmt.Errorf("bootstrap: tar: %w", err)
	}
	importErr := cli.ImportImage(ctx, pipe, tag, []string{
		`CMD ["/bin/bash"]`,
		"ENV LANG=C.UTF-8",
		"LABEL " + sandboximage.LabelPackages + "=" + sandboximage.PackagesHash(suite),
	})
	if importErr != nil {
		_ = tar.Process.Kill()
	}
	waitErr := tar.Wait()
	if importErr != nil {
		return fmt.Errorf("bootstrap: %w", importErr)
	}
	if waitErr != nil {
		return fmt.Errorf("bootstrap: tar: %w: %s", waitErr, strings.TrimSpace(tarErr.String()))
	}
	say("base image %s is ready", tag)
	return nil
}

// debootstrapScript finds debootstrap's script for suite. Suites newer than
// the host's debootstrap (forky on a bookworm host) bootstrap with sid's.
func debootstrapScript(suite string) (string, error) {
	for _, dir := range []string{"/usr/share/debootstrap/scripts", "/usr/local/share/debootstrap/scripts"} {
		for _, name := range []string{suite, "sid"} {
			p := filepath.Join(dir, name)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%w: no debootstrap script for %s or sid; reinstall debootstrap", ErrCannotBootstrap, suite)
}

// run runs a command, copying its output line by line (indented) to out.
func run(ctx context.Context, out io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	var tail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(out, "  %s\n", line)
			tail = append(tail, line)
			if len(tail) > 8 {
				tail = tail[1:]
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, strings.Join(tail, "\n"))
	}
	return nil
}
