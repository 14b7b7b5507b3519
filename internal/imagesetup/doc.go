// Package imagesetup makes sure the sandbox image exists and is current. It is
// what `sandbox-setup` runs, and what the test harness and the demo call so
// that a fresh machine needs no manual step.
//
// The image is built from the sources embedded in package sandboximage on a
// Debian base. When no base is present and none can be pulled (an engine with
// no registry), it bootstraps one on the host with debootstrap, installing
// the image's Python packages into that root filesystem before importing it,
// so the image build itself needs no network either.
package imagesetup
