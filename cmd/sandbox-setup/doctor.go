package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// report prints one line per check and remembers whether any failed.
type report struct {
	w      io.Writer
	failed int
}

func (r *report) ok(what, format string, args ...any) {
	fmt.Fprintf(r.w, "ok    %-10s %s\n", what, fmt.Sprintf(format, args...))
}

func (r *report) warn(what, msg, fix string) {
	fmt.Fprintf(r.w, "warn  %-10s %s\n", what, msg)
	if fix != "" {
		fmt.Fprintf(r.w, "      %-10s fix: %s\n", "", fix)
	}
}

func (r *report) fail(what, msg, fix string) {
	r.failed++
	fmt.Fprintf(r.w, "FAIL  %-10s %s\n", what, msg)
	if fix != "" {
		fmt.Fprintf(r.w, "      %-10s fix: %s\n", "", fix)
	}
}

// securityProbe runs inside the sandbox shape and prints what it finds.
const securityProbe = `
import os, socket
print("uid", os.getuid())
try:
    open("/usr/agentbox-probe", "w"); print("rootfs writable")
except OSError:
    print("rootfs read-only")
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1); print("network open")
except OSError:
    print("network closed")
print("caps", open("/proc/self/status").read().split("CapEff:")[1].split()[0])
`

func doctor(ctx context.Context, cli *docker.Client, cfg config.Config, image string, stdout, stderr io.Writer) int {
	r := &report{w: stdout}
	info, err := cli.Info(ctx)
	if err != nil {
		if errors.Is(err, docker.ErrUnreachable) {
			fmt.Fprintf(stderr, "sandbox-setup: %v\n", err)
			return exitNoEngine
		}
		fmt.Fprintf(stderr, "sandbox-setup: engine: %v\n", err)
		return exitNoEngine
	}
	r.ok("engine", "Docker %s at %s (API %s, %s, %d CPUs, %.1f GiB)", info.ServerVersion, cli.Host(), info.APIVersion, info.OS, info.NCPU, float64(info.MemTotal)/(1<<30))
	cg := info.CgroupVersion
	if cg == "" {
		cg = "1"
	}
	r.ok("storage", "driver %s, cgroup v%s (%s)", info.StorageDriver, cg, info.CgroupDriver)
	if !info.MemoryLimit {
		r.fail("limits", "the engine cannot limit memory: sandboxes would have no memory limit", "enable the memory cgroup controller (kernel parameter cgroup_enable=memory) and restart the engine")
	} else if !info.SwapLimit {
		r.warn("limits", "the engine cannot limit swap: SANDBOX_MEMORY_MB bounds RAM only", "enable swap accounting (kernel parameter swapaccount=1)")
	} else {
		r.ok("limits", "memory, swap and process limits supported")
	}
	if !info.PidsLimit {
		r.fail("limits", "the engine cannot limit processes: a fork bomb would reach the host", "enable the pids cgroup controller")
	}
	checkSeccompSetting(r, cfg, slices.ContainsFunc(info.SecurityOptions, func(s string) bool { return strings.Contains(s, "seccomp") }))
	if cfg.Runtime != "" {
		if slices.Contains(info.Runtimes, cfg.Runtime) {
			r.ok("runtime", "%s is available (SANDBOX_RUNTIME)", cfg.Runtime)
		} else {
			r.fail("runtime", fmt.Sprintf("SANDBOX_RUNTIME=%s is not a runtime of this engine (it has: %s)", cfg.Runtime, strings.Join(info.Runtimes, ", ")), "install and register it with the engine, or unset SANDBOX_RUNTIME")
		}
	}

	st, err := imagesetup.Check(ctx, cli, image)
	switch {
	case err != nil:
		r.fail("image", fmt.Sprintf("%s: %v", image, err), "")
	case !st.Present:
		r.fail("image", fmt.Sprintf("%s is missing", image), "run sandbox-setup")
	case st.Foreign:
		r.fail("image", fmt.Sprintf("%s is not an agentbox sandbox image (no label %s)", image, sandboximage.LabelProtocol),
			"build one with sandbox-setup under a name of ours (SANDBOX_IMAGE=agentbox-sandbox:latest) or derive one from agentbox-sandbox:latest")
	case st.Protocol != kernel.ProtocolVersion:
		r.fail("image", fmt.Sprintf("%s speaks kernel protocol %d, this program %d", image, st.Protocol, kernel.ProtocolVersion), "run sandbox-setup to rebuild it")
	case !st.Current:
		r.fail("image", fmt.Sprintf("%s is stale: built from sources %s, this program embeds %s", image, short(st.SourceHash), short(st.WantHash)), "run sandbox-setup to rebuild it")
	default:
		r.ok("image", "%s is current (sources %s, protocol %d)", image, short(st.WantHash), st.Protocol)
	}

	if st.Present && !st.Foreign { // the probes need our image's python3
		out, err := imagesetup.RunOnce(ctx, cli, image, []string{"python3", "-c", securityProbe})
		if err != nil {
			r.fail("security", fmt.Sprintf("a container with the sandbox's security options does not run: %v", err), "see the error; `docker run --read-only --cap-drop ALL --security-opt no-new-privileges --network none` must work on this host")
		} else {
			checkProbe(r, out)
		}
		checkSeccompProbe(ctx, r, cli, cfg, image)
	} else {
		r.warn("security", "not checked: the image is missing or not ours", "run sandbox-setup, then sandbox-setup --check")
	}

	if r.failed > 0 {
		fmt.Fprintf(stdout, "\n%d problem(s) found\n", r.failed)
		return exitProblem
	}
	fmt.Fprintln(stdout, "\nall checks passed")
	return exitOK
}

func checkProbe(r *report, out string) {
	want := map[string]string{
		"uid":     "uid 1000",
		"rootfs":  "rootfs read-only",
		"network": "network closed",
		"caps":    "caps 0000000000000000",
	}
	var bad []string
	for _, key := range []string{"uid", "rootfs", "network", "caps"} {
		if !strings.Contains(out, want[key]) {
			bad = append(bad, key)
		}
	}
	if len(bad) > 0 {
		r.fail("security", "the sandbox shape is weaker than asked ("+strings.Join(bad, ", ")+"): "+strings.Join(strings.Fields(out), " "), "check the engine's user-namespace and seccomp settings")
		return
	}
	r.ok("security", "non-root user, read-only root, no network, no capabilities, no-new-privileges: all hold")
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	if s == "" {
		return "(none)"
	}
	return s
}
