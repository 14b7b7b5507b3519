package session_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
)

// containerEnv is the environment the engine gives container id's first
// process (the root init), read from outside.
func containerEnv(t *testing.T, id string) []string {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{json .Config.Env}}", id).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", id, err)
	}
	var env []string
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatalf("docker inspect %s: %v: %s", id, err, out)
	}
	return env
}

// TestUserPythonEnvReachesSandboxUser: a session created with PYTHONPATH
// (as OpenSandbox's quick start does) has it in the kernel's os.environ and
// sys.path and in commands, while the container's own environment, which
// its root init starts with, holds no variable of the caller's (issue 24
// row 3). Before, PYTHON* was refused at create.
func TestUserPythonEnvReachesSandboxUser(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := m.Start(ctx, "k", session.Env(map[string]string{"PYTHONPATH": "/app", "MY_SETTING": "on"}))
	if err != nil {
		t.Fatalf("start with PYTHONPATH: %v", err)
	}
	res := mustExec(t, m, "k", "import os, sys\nprint(os.environ.get('PYTHONPATH'), '/app' in sys.path, os.environ.get('MY_SETTING'))")
	if res.Error != nil || res.Stdout != "/app True on\n" {
		t.Errorf("the kernel: stdout %q, error %v", res.Stdout, res.Error)
	}
	// The worker restarts with the same environment.
	mustExec(t, m, "k", "import os\nos._exit(3)")
	res = mustExec(t, m, "k", "import os, sys\nprint(os.environ.get('PYTHONPATH'), '/app' in sys.path)")
	if res.Stdout != "/app True\n" {
		t.Errorf("the restarted kernel: stdout %q, error %v", res.Stdout, res.Error)
	}
	cmd := runInSession(t, m, "k", `echo "$PYTHONPATH $MY_SETTING"; python3 -c 'import sys; print("/app" in sys.path)'`)
	if cmd.ExitCode != 0 || cmd.Stdout != "/app on\nTrue\n" {
		t.Errorf("a command: exit %d, stdout %q, stderr %q", cmd.ExitCode, cmd.Stdout, cmd.Stderr)
	}
	// A command's own environment still wins over the session's.
	cmd = runInSession(t, m, "k", `echo "$PYTHONPATH"`)
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if c, err := m.Run(ctx2, "k", session.Command{Line: `echo "$PYTHONPATH"`, Env: map[string]string{"PYTHONPATH": "/other"}}); err != nil || c.Stdout != "/other\n" {
		t.Errorf("a command's own PYTHONPATH: %+v %v (without it: %q)", c, err, cmd.Stdout)
	}
	for _, kv := range containerEnv(t, info.ContainerID) {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PYTHON") && name != "PYTHONDONTWRITEBYTECODE" || name == "MY_SETTING" {
			t.Errorf("the container's environment (the root init's) holds the caller's %s", kv)
		}
	}
}

// TestHostilePythonEnvRunsNothingAsRoot: code in a BIND session (whose
// files outlive its container) makes /session readable to all and plants
// Python start-up hooks: a .pth file in the user site folder of
// HOME=/session, and, for a session created with PYTHONPATH and
// PYTHONSTARTUP, a sitecustomize.py and a start-up file where they point.
// Each writes a marker naming the uid that ran it. The next container of
// the key starts its root init with those files in place, and runs a
// command and a file operation (root supervisor, helpers): only the
// sandbox user's processes may run the hooks, never a root one. Before,
// the init (python3 without -I, HOME=/session) ran the .pth file as root
// (marker pth-0), and PYTHONPATH was refused at create.
func TestHostilePythonEnvRunsNothingAsRoot(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string // a marker the sandbox user's processes leave
	}{
		{"user site", nil, "pth-1000"},
		{"PYTHONPATH and PYTHONSTARTUP", map[string]string{"PYTHONPATH": "/session/evil", "PYTHONSTARTUP": "/session/evil/startup.py"}, "sitecustomize-1000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hostileHooks(t, session.Env(tt.env), tt.want)
		})
	}
}

func hostileHooks(t *testing.T, env session.StartOption, want string) {
	m := newManager(t, func(c *config.Config) { c.SessionStorage = config.StorageBind })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := m.Start(ctx, "h", env); err != nil {
		t.Fatalf("start: %v", err)
	}
	plant := `import os, site
hook = "import os\ntry:\n    open('/session/marks/%s-%d' % (NAME, os.geteuid()), 'w').close()\nexcept OSError:\n    pass\n"
os.chmod('/session', 0o777)
os.makedirs('/session/marks', exist_ok=True)
os.chmod('/session/marks', 0o777)
os.makedirs('/session/evil', exist_ok=True)
os.chmod('/session/evil', 0o755)
for name in ('sitecustomize', 'usercustomize', 'startup'):
    with open('/session/evil/%s.py' % name, 'w') as f:
        f.write("NAME = %r\n" % name + hook)
user_site = site.getusersitepackages()
os.makedirs(user_site, exist_ok=True)
p = user_site
while p != '/session':
    os.chmod(p, 0o755)
    p = os.path.dirname(p)
with open(os.path.join(user_site, 'agentbox-hostile.pth'), 'w') as f:
    f.write("import os; NAME = 'pth'; exec(%r)\n" % hook)
print(user_site)
`
	if res := mustExec(t, m, "h", plant); res.Error != nil || !strings.HasPrefix(res.Stdout, "/session/") {
		t.Fatalf("plant: %+v", res)
	}
	if err := m.Stop(ctx, "h"); err != nil {
		t.Fatal(err)
	}
	// A new container of the key: its init starts with the files in place.
	if _, err := m.Start(ctx, "h", env); err != nil {
		t.Fatalf("start again: %v", err)
	}
	runInSession(t, m, "h", "python3 -c pass")
	if _, err := m.StatFile(ctx, "h", "/session/evil"); err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, m, "h", "import os\nprint(' '.join(sorted(os.listdir('/session/marks'))))")
	if res.Error != nil {
		t.Fatalf("list markers: %+v", res)
	}
	marks := strings.Fields(res.Stdout)
	for _, mk := range marks {
		if !strings.HasSuffix(mk, "-1000") {
			t.Errorf("a hook ran as another user than the sandbox user: %s (markers %v)", mk, marks)
		}
	}
	// The hooks were live for the sandbox user's own processes: the check
	// above is not vacuous.
	if !slices.Contains(marks, want) {
		t.Errorf("no %s marker: the hooks did not run in the kernel (markers %v)", want, marks)
	}
}
