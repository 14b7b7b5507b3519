package session

import (
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// TestUserEnvNotInRootEnv: the variables a session is created with reach
// its container only under sandboximage.UserEnvPrefix, which the init and
// the command supervisor apply to the sandbox user's processes alone; the
// container's environment, which the root init starts with, never holds
// them by their own names. So PYTHON* variables are taken (issue 24 row 3),
// while those the loader or agentbox reads (LD_*, AGENTBOX_*) stay
// refused. Before, PYTHONPATH was refused and any other variable went into
// the container's environment as is.
func TestUserEnvNotInRootEnv(t *testing.T) {
	m := &Manager{cfg: config.Default()}
	vars := map[string]string{"PYTHONPATH": "/app", "PYTHONSTARTUP": "/app/start.py", "PYTHONHOME": "/usr", "MY_SETTING": "a=b"}
	env, err := m.checkEnv(vars)
	if err != nil {
		t.Fatalf("PYTHON* refused: %v", err)
	}
	spec := m.spec("n", RoleSession, "")
	m.applyCreation(&spec, &creation{env: env, memoryMB: m.cfg.MemoryMB, cpus: m.cfg.CPUs, image: config.DefaultImageName}, time.Now())
	for name, v := range vars {
		want := sandboximage.UserEnvPrefix + name + "=" + v
		found := false
		for _, kv := range spec.Env {
			if kv == want {
				found = true
			}
			if strings.HasPrefix(kv, name+"=") {
				t.Errorf("the container's environment holds %s by its own name: %q", name, kv)
			}
		}
		if !found {
			t.Errorf("the container's environment lacks %q: %q", want, spec.Env)
		}
	}
	for _, name := range []string{"LD_PRELOAD", "AGENTBOX_USER", "PATH", "BASH_ENV"} {
		if _, err := m.checkEnv(map[string]string{name: "/session/x"}); err == nil {
			t.Errorf("%s taken", name)
		}
	}
}

// TestUserEnvPrefixAgrees: the init and the command supervisor strip the
// prefix the Manager adds.
func TestUserEnvPrefixAgrees(t *testing.T) {
	want := `USER_ENV_PREFIX = "` + sandboximage.UserEnvPrefix + `"`
	for _, name := range []string{"agentbox_init.py", "agentbox_supervisor.py"} {
		src, err := fs.ReadFile(sandboximage.Files(), name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), want) {
			t.Errorf("%s lacks %s", name, want)
		}
	}
}

// TestProbesKnowTheSupervisor: the probe that counts running commands
// looks for the supervisor where the image installs it.
func TestProbesKnowTheSupervisor(t *testing.T) {
	src, err := fs.ReadFile(sandboximage.Files(), "agentbox_probes.py")
	if err != nil {
		t.Fatal(err)
	}
	if want := `SUPERVISOR = "` + sandboximage.SupervisorPath + `"`; !strings.Contains(string(src), want) {
		t.Errorf("agentbox_probes.py lacks %s", want)
	}
}
