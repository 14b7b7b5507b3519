package imagesetup_test

import (
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

func TestSeccompLockedDownCarriesTheProfile(t *testing.T) {
	if got := imagesetup.LockedDown("x").Seccomp; got != string(sandboximage.SeccompProfile()) {
		t.Errorf("LockedDown's seccomp profile is %.40q, want agentbox's", got)
	}
}

// TestProbeSeccomp runs the probe under agentbox's profile and under the
// engine's: the probe tells them apart.
func TestProbeSeccomp(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	ours, err := imagesetup.ProbeSeccomp(timeout(t, time.Minute), cli, image, string(sandboximage.SeccompProfile()), "")
	if err != nil {
		t.Fatal(err)
	}
	if ours.IoUringSetup != "EPERM" || !ours.ProfileEnforced() {
		t.Errorf("under agentbox's profile: %+v, want io_uring_setup and ptrace refused with EPERM", ours)
	}
	engine, err := imagesetup.ProbeSeccomp(timeout(t, time.Minute), cli, image, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if engine.ProfileEnforced() {
		t.Errorf("under the engine's profile: %+v, want ptrace let through (ESRCH)", engine)
	}
	t.Logf("agentbox's profile: %+v; the engine's: %+v", ours, engine)
}

// TestSeccompProbeEnforced: io_uring refused by the kernel or the engine,
// with ptrace let through, is not agentbox's profile at work.
func TestSeccompProbeEnforced(t *testing.T) {
	for _, tt := range []struct {
		p    imagesetup.SeccompProbe
		want bool
	}{
		{imagesetup.SeccompProbe{IoUringSetup: "EPERM", Ptrace: "EPERM"}, true},
		{imagesetup.SeccompProbe{IoUringSetup: "ENOSYS", Ptrace: ""}, true},
		{imagesetup.SeccompProbe{IoUringSetup: "EPERM", Ptrace: "ESRCH"}, false},
		{imagesetup.SeccompProbe{IoUringSetup: "ok", Ptrace: "EPERM"}, false},
	} {
		if got := tt.p.ProfileEnforced(); got != tt.want {
			t.Errorf("%+v.ProfileEnforced() = %v, want %v", tt.p, got, tt.want)
		}
	}
}
