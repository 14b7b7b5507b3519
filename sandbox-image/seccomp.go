package sandboximage

import (
	"bytes"
	_ "embed"

	"github.com/agentbox/agentbox/sandbox-image/internal/seccompgen"
)

//go:generate go run ./internal/seccompgen/genprofile -o seccomp.json

// seccompProfile is embedded on its own, outside the image sources, so that
// a change to it takes effect at the next session start without an image
// rebuild (SourceHash does not cover it).
//
//go:embed seccomp.json
var seccompProfile []byte

// SeccompProfile returns agentbox's seccomp profile, the JSON the engine is
// given for every session container unless SANDBOX_SECCOMP says otherwise:
// the Moby project's default profile (what Docker applies when asked for
// none; Apache License 2.0, Copyright The Moby Authors) without the
// syscalls SeccompDenied lists. A call the profile does not allow fails
// with EPERM. seccomp.md says where it comes from and how to regenerate it.
// The result is a copy.
func SeccompProfile() []byte { return bytes.Clone(seccompProfile) }

// SeccompDenied returns the syscalls SeccompProfile denies on top of the
// engine's default profile, such as io_uring_setup; the reason for each is
// in sandbox-image/internal/seccompgen (Removals).
func SeccompDenied() []string { return seccompgen.Denied() }
