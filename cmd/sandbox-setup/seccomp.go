package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/imagesetup"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

const fixSeccompDefault = "unset SANDBOX_SECCOMP for agentbox's profile"

// checkSeccompSetting reports the seccomp profile SANDBOX_SECCOMP puts in
// force, and whether the engine can apply it.
func checkSeccompSetting(r *report, cfg config.Config, engineSeccomp bool) {
	denied := sandboximage.SeccompDenied()
	wantsProfile := cfg.Seccomp != config.SeccompEngine && cfg.Seccomp != config.SeccompUnconfined
	if !engineSeccomp {
		if wantsProfile {
			r.fail("seccomp", "the engine has no seccomp support, and SANDBOX_SECCOMP="+cfg.Seccomp+" asks for a profile: sessions cannot start", "run an engine built with seccomp support")
			return
		}
		r.warn("seccomp", "the engine runs containers without a seccomp profile", "run an engine built with seccomp support")
	}
	switch cfg.Seccomp {
	case config.SeccompDefault:
		r.ok("seccomp", "agentbox's profile (SANDBOX_SECCOMP=default): the engine's default without %d syscalls (%s)", len(denied), strings.Join(denied, ", "))
	case config.SeccompEngine:
		r.warn("seccomp", "the engine's own default profile (SANDBOX_SECCOMP=engine)",
			fmt.Sprintf("%s, which also removes io_uring and %d other syscalls no cell needs", fixSeccompDefault, len(denied)-1))
	case config.SeccompUnconfined:
		r.warn("seccomp", "no seccomp filter (SANDBOX_SECCOMP=unconfined): code reaches every syscall of the host's kernel",
			fixSeccompDefault+" (and SANDBOX_ALLOW_UNCONFINED)")
	default:
		sum := sha256.Sum256([]byte(cfg.SeccompJSON))
		same := ""
		if bytes.Equal([]byte(cfg.SeccompJSON), sandboximage.SeccompProfile()) {
			same = ", the same as agentbox's"
		}
		r.ok("seccomp", "profile file %s (SANDBOX_SECCOMP, %d bytes, sha256 %s%s)", cfg.Seccomp, len(cfg.SeccompJSON), hex.EncodeToString(sum[:])[:12], same)
	}
}

// checkSeccompProbe runs a throwaway sandbox with the configured profile and
// runtime, and reports whether io_uring_setup went through.
func checkSeccompProbe(ctx context.Context, r *report, cli *docker.Client, cfg config.Config, image string) {
	p, err := imagesetup.ProbeSeccomp(ctx, cli, image, cfg.SeccompProfile(sandboximage.SeccompProfile()), cfg.Runtime)
	if err != nil {
		r.fail("seccomp", fmt.Sprintf("a sandbox with SANDBOX_SECCOMP=%s does not run: %v", cfg.Seccomp, err), "see the error; sessions will not start either")
		return
	}
	uring := "allowed"
	if p.IoUringRefused() {
		uring = "refused (" + p.IoUringSetup + ")"
	}
	wantsProfile := cfg.Seccomp != config.SeccompEngine && cfg.Seccomp != config.SeccompUnconfined
	if cfg.Runtime == "runsc" {
		// gVisor's runsc gets the profile in the OCI spec and ignores it
		// unless started with --oci-seccomp; the probe's ptrace, which the
		// profile denies and gVisor implements, tells which it is.
		switch {
		case !wantsProfile:
			r.ok("seccomp", "in a sandbox (gVisor): gVisor serves syscalls itself; io_uring_setup is %s", uring)
		case p.Ptrace == "EPERM":
			r.ok("seccomp", "in a sandbox (gVisor): runsc applies the profile (--oci-seccomp); io_uring_setup is %s", uring)
		default:
			r.warn("seccomp", fmt.Sprintf("in a sandbox (gVisor): runsc does not apply the profile (it runs without --oci-seccomp); gVisor serves syscalls itself, and io_uring_setup is %s", uring),
				`add "--oci-seccomp" to runsc's runtimeArgs in the engine's daemon.json for the profile to apply inside gVisor too`)
		}
		return
	}
	switch {
	case cfg.Seccomp == config.SeccompDefault && !p.ProfileEnforced():
		r.fail("seccomp", fmt.Sprintf("in a sandbox: io_uring_setup %s, ptrace %s: agentbox's profile is not in force", p.IoUringSetup, p.Ptrace),
			"check that the engine supports seccomp (docker info: Security Options) and that its runtime applies the profile it is given")
	case p.IoUringRefused() && wantsProfile && p.Ptrace == "EPERM":
		r.ok("seccomp", "in a sandbox: io_uring_setup %s, and ptrace, which the engine's default allows: the profile is in force", uring)
	case p.IoUringRefused():
		r.ok("seccomp", "in a sandbox: io_uring_setup %s", uring)
	case wantsProfile:
		r.warn("seccomp", "in a sandbox: io_uring_setup allowed by the profile file", fixSeccompDefault)
	default:
		r.warn("seccomp", "in a sandbox: io_uring_setup allowed", fixSeccompDefault)
	}
}
