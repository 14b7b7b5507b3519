package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/tools"
)

// shellFake is a fake that can also run shell commands.
type shellFake struct {
	*fake
	res  *session.CommandResult
	err  error
	last session.Command
}

func (s *shellFake) Run(_ context.Context, key string, cmd session.Command) (*session.CommandResult, error) {
	s.record("run " + key + " " + cmd.Line)
	s.last = cmd
	return s.res, s.err
}

func shellTool(t *testing.T, m tools.Manager, max int) tools.Tool {
	t.Helper()
	for _, tl := range tools.New(m, tools.Options{MaxReplyBytes: max}) {
		if tl.Name == "run_shell" {
			var schema map[string]any
			if err := json.Unmarshal(tl.Schema, &schema); err != nil {
				t.Fatalf("schema: %v", err)
			}
			return tl
		}
	}
	t.Fatal("no run_shell tool")
	return tools.Tool{}
}

func TestRunShellOfferedOnlyWhenRunnable(t *testing.T) {
	for _, tl := range tools.New(&fake{}, tools.Options{}) {
		if tl.Name == "run_shell" {
			t.Fatal("run_shell offered by a Manager that cannot run commands")
		}
	}
}

// TestRunShellReplies: bad input explained, replies capped, binary output
// described, timeouts and cuts noted, start failures explained.
func TestRunShellReplies(t *testing.T) {
	big := strings.Repeat("a", 5000) + strings.Repeat("z", 5000)
	cases := []struct {
		name   string
		input  string
		res    *session.CommandResult
		err    error
		want   []string
		absent []string
	}{
		{"ok", `{"command": "echo hi"}`, &session.CommandResult{Stdout: "hi\n"}, nil, []string{"exit code: 0\nstdout:\nhi\n"}, []string{"notes"}},
		{"exit and stderr", `{"command": "false"}`, &session.CommandResult{ExitCode: 1, Stderr: "no\n"}, nil, []string{"exit code: 1\n", "stderr:\nno\n"}, nil},
		{"silent", `{"command": "true"}`, &session.CommandResult{}, nil, []string{"printed nothing"}, nil},
		{"capped", `{"command": "x"}`, &session.CommandResult{Stdout: big}, nil, []string{"bytes cut", "aaa", "zzz"}, nil},
		{"binary", `{"command": "cat /bin/ls"}`, &session.CommandResult{Stdout: "\x7fELF\x02\x01\x01\x00\x00\x00"}, nil, []string{"binary output, 10 B, not shown"}, []string{"ELF"}},
		{"timeout", `{"command": "sleep 9", "timeout_s": 1}`, &session.CommandResult{ExitCode: 137, Signal: "SIGKILL", TimedOut: true, Duration: time.Second}, nil,
			[]string{"killed by SIGKILL", "timed out and was killed", "every process it started"}, nil},
		{"truncated", `{"command": "yes"}`, &session.CommandResult{Stdout: "y\n", Truncated: map[string]int64{"stdout": 99}}, nil, []string{"cut 99 bytes from the middle of stdout"}, nil},
		{"no command", `{"command": "  "}`, nil, nil, []string{`Invalid input: "command" is required`}, nil},
		{"unknown field", `{"command": "ls", "sudo": true}`, nil, nil, []string{"Invalid input", "sudo"}, nil},
		{"relative cwd", `{"command": "ls", "cwd": "work"}`, nil, nil, []string{`"cwd" must be an absolute path`}, nil},
		{"timeout too long", `{"command": "ls", "timeout_s": 100000}`, nil, nil, []string{`"timeout_s" must be`}, nil},
		{"not an object", `["ls"]`, nil, nil, []string{"Invalid input"}, nil},
		{"missing cwd", `{"command": "ls", "cwd": "/nope"}`, nil,
			&session.Error{Op: "run", Key: "default", Err: &session.CommandError{Op: "chdir", Path: "/nope", Err: fs.ErrNotExist}},
			[]string{"could not start: chdir /nope: file does not exist"}, nil},
		{"bad env from the manager", `{"command": "ls"}`, nil,
			&session.Error{Op: "run", Key: "default", Err: fmt.Errorf("%w: environment variable name %q", session.ErrInvalidCommand, "1A")},
			[]string{`Invalid input: environment variable name "1A"`}, nil},
		{"lost", `{"command": "ls"}`, nil, &session.Error{Op: "run", Key: "default", Err: session.ErrSessionLost}, []string{"sandbox was lost"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &shellFake{fake: &fake{}, res: c.res, err: c.err}
			reply, err := shellTool(t, m, 1000).Call(context.Background(), json.RawMessage(c.input))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(reply, w) {
					t.Errorf("reply %q lacks %q", reply, w)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(reply, a) {
					t.Errorf("reply %q has %q", reply, a)
				}
			}
			if len(reply) > 1500 {
				t.Errorf("reply of %d bytes, cap 1000", len(reply))
			}
		})
	}
}

// TestRunShellPassesInput: the command, folder and timeout reach the
// Manager; a system failure is a Go error.
func TestRunShellPassesInput(t *testing.T) {
	m := &shellFake{fake: &fake{}, res: &session.CommandResult{}}
	if _, err := shellTool(t, m, 0).Call(context.Background(), json.RawMessage(`{"command":"ls","cwd":"/tmp","timeout_s":2.5}`)); err != nil {
		t.Fatal(err)
	}
	if m.last.Line != "ls" || m.last.Cwd != "/tmp" || m.last.Timeout != 2500*time.Millisecond || m.calls[0] != "run default ls" {
		t.Fatalf("%+v %v", m.last, m.calls)
	}
	m.err = session.ErrUnavailable
	if _, err := shellTool(t, m, 0).Call(context.Background(), json.RawMessage(`{"command":"ls"}`)); err == nil {
		t.Fatal("engine down: no error")
	}
}

// TestRunShellOnTheEngine: run_shell reaches the same sandbox as
// code_sandbox, as the sandbox user, and describes binary output.
func TestRunShellOnTheEngine(t *testing.T) {
	m := engineManager(t)
	var code, shell tools.Tool
	for _, tl := range tools.New(m, tools.Options{}) {
		switch tl.Name {
		case "code_sandbox":
			code = tl
		case "run_shell":
			shell = tl
		}
	}
	ctx := context.Background()
	if _, err := code.Call(ctx, json.RawMessage(`{"code": "open('/session/from_python.txt', 'w').write('hello')"}`)); err != nil {
		t.Fatal(err)
	}
	reply, err := shell.Call(ctx, json.RawMessage(`{"command": "cat from_python.txt; echo; id -u"}`))
	if err != nil || reply != "exit code: 0\nstdout:\nhello\n1000\n" {
		t.Fatalf("reply %q, %v", reply, err)
	}
	reply, err = shell.Call(ctx, json.RawMessage(`{"command": "head -c 3000 /dev/urandom"}`))
	if err != nil || !strings.Contains(reply, "binary output") {
		t.Fatalf("reply %q, %v", reply, err)
	}
}
