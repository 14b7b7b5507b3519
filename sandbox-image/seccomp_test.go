package sandboximage_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	sandboximage "github.com/agentbox/agentbox/sandbox-image"
	"github.com/agentbox/agentbox/sandbox-image/internal/seccompgen"
)

// profileRule is the part of a rule in Docker's profile format the tests
// read.
type profileRule struct {
	Names    []string `json:"names"`
	Name     string   `json:"name"`
	Action   string   `json:"action"`
	ErrnoRet *uint    `json:"errnoRet"`
}

type profileDoc struct {
	DefaultAction   string        `json:"defaultAction"`
	DefaultErrnoRet *uint         `json:"defaultErrnoRet"`
	Syscalls        []profileRule `json:"syscalls"`
}

func TestSeccompProfileDeniesEveryListedSyscall(t *testing.T) {
	data := sandboximage.SeccompProfile()
	if !json.Valid(data) {
		t.Fatal("the embedded profile is not valid JSON")
	}
	var p profileDoc
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	// What no rule allows gets the default action: it must refuse with
	// EPERM (1) or ENOSYS (38), never kill or let through.
	if p.DefaultAction != "SCMP_ACT_ERRNO" || p.DefaultErrnoRet == nil || (*p.DefaultErrnoRet != 1 && *p.DefaultErrnoRet != 38) {
		t.Fatalf("default action %s errno %v, want SCMP_ACT_ERRNO with 1 (EPERM) or 38 (ENOSYS)", p.DefaultAction, p.DefaultErrnoRet)
	}
	denied := sandboximage.SeccompDenied()
	for _, want := range []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "perf_event_open", "bpf", "keyctl", "ptrace", "open_by_handle_at"} {
		if !slices.Contains(denied, want) {
			t.Errorf("SeccompDenied lacks %s", want)
		}
	}
	allowed := make(map[string]bool)
	for i, r := range p.Syscalls {
		names := append(slices.Clone(r.Names), r.Name)
		if r.Action == "SCMP_ACT_ERRNO" {
			// A refusal may name a denied call, but only with EPERM or ENOSYS.
			if r.ErrnoRet != nil && *r.ErrnoRet != 1 && *r.ErrnoRet != 38 {
				for _, n := range names {
					if slices.Contains(denied, n) {
						t.Errorf("rule %d refuses %s with errno %d, want EPERM or ENOSYS", i, n, *r.ErrnoRet)
					}
				}
			}
			continue
		}
		for _, n := range names {
			if slices.Contains(denied, n) {
				t.Errorf("rule %d (%s) names %s, which SeccompDenied says is denied", i, r.Action, n)
			}
		}
		for _, n := range r.Names {
			allowed[n] = true
		}
	}
	// A profile that allows next to nothing would pass the loop above and
	// break every session: the upstream default allows over 300 calls.
	if len(allowed) < 300 {
		t.Errorf("the profile allows %d syscall names; the engine's default allows over 300", len(allowed))
	}
	for _, keep := range []string{"setresuid", "setgroups", "prctl", "capset", "clone", "execve", "wait4", "kill", "sendmsg", "recvmsg", "getsockopt", "pipe2", "socketpair", "futex", "mmap", "pidfd_open"} {
		if slices.Contains(denied, keep) || !allowed[keep] {
			t.Errorf("the profile does not allow %s, which the init or the kernel needs", keep)
		}
	}
}

// TestSeccompProfileIsNotAnImageSource: the profile is applied by the host
// when it creates a container, so changing it must not make the image
// stale.
func TestSeccompProfileIsNotAnImageSource(t *testing.T) {
	if _, err := fs.Stat(sandboximage.Files(), "seccomp.json"); err == nil {
		t.Error("seccomp.json is among the image sources: changing the profile would force an image rebuild")
	}
}

// TestSeccompProfileRegenerates derives the profile again from the upstream
// file in the module cache and compares it with the committed one.
func TestSeccompProfileRegenerates(t *testing.T) {
	modcache := os.Getenv("GOMODCACHE")
	if modcache == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			t.Skipf("no go command to find the module cache: %v", err)
		}
		modcache = strings.TrimSpace(string(out))
	}
	path := seccompgen.UpstreamPath(modcache)
	upstream, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("upstream profile not in the module cache (%v); `go mod download %s@%s` fetches it, CI cannot", err, seccompgen.UpstreamModule, seccompgen.UpstreamVersion)
	}
	got, removed, err := seccompgen.Derive(upstream)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("seccomp.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, committed) {
		t.Errorf("seccomp.json differs from what %s derives from %s: run go generate ./sandbox-image", "genprofile", path)
	}
	if !slices.Contains(removed, "ptrace") {
		t.Errorf("removed %v: upstream allows ptrace on kernels from 4.8, so it must have been taken out", removed)
	}
	// Only removals: with nothing to remove, Derive gives upstream back.
	saved := seccompgen.Removals
	seccompgen.Removals = nil
	same, _, err := seccompgen.Derive(upstream)
	seccompgen.Removals = saved
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(same), bytes.TrimSpace(upstream)) {
		t.Error("Derive changes more than the removed names: with no removals its output differs from upstream")
	}
}

func TestSeccompDeriveRefusesWeakDefaults(t *testing.T) {
	for _, src := range []string{
		`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}`,
		`{"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 0, "syscalls": []}`,
		`{"defaultAction": "SCMP_ACT_LOG", "syscalls": []}`,
		`{"syscalls": []}`,
		`[]`,
		`{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"name": "ptrace", "action": "SCMP_ACT_ALLOW"}]}`,
	} {
		if _, _, err := seccompgen.Derive([]byte(src)); err == nil {
			t.Errorf("Derive(%s) succeeded; want an error", src)
		}
	}
	out, removed, err := seccompgen.Derive([]byte(`{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
		{"names": ["read", "io_uring_setup"], "action": "SCMP_ACT_ALLOW"},
		{"names": ["ptrace"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "4.8"}},
		{"names": ["io_uring_enter"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var p profileDoc
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Syscalls) != 2 || !slices.Equal(p.Syscalls[0].Names, []string{"read"}) || p.Syscalls[1].Action != "SCMP_ACT_ERRNO" {
		t.Errorf("Derive kept %+v; want read allowed, the ptrace rule gone, the ENOSYS rule kept", p.Syscalls)
	}
	if !slices.Equal(removed, []string{"io_uring_setup", "ptrace"}) {
		t.Errorf("removed %v", removed)
	}
}
