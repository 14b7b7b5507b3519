package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/server/mcpserver"
)

// toolNames are the tools the server offers when datasets can be selected.
var toolNames = []string{"list_artifacts", "list_datasets", "list_files", "read_file", "reset_session",
	"run_python", "run_shell", "select_dataset", "session_info", "write_file"}

// TestTools runs every tool, its happy path and its bad input, against the
// real engine through the SDK's in-memory transport and through streamable
// HTTP.
func TestTools(t *testing.T) {
	m := engineManager(t)
	transports := []struct {
		name    string
		connect func(t *testing.T) *mcp.ClientSession
	}{
		{"memory", func(t *testing.T) *mcp.ClientSession { return memoryClient(t, m, mcpserver.Options{}) }},
		{"http", func(t *testing.T) *mcp.ClientSession {
			return httpClient(t, httpServer(t, m, mcpserver.Options{}), "", nil)
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			cs := tr.connect(t)
			s := func(name string) string { return tr.name + "-" + name } // sessions of this transport
			t.Run("list", func(t *testing.T) { checkToolList(t, cs) })
			t.Run("run_python", func(t *testing.T) { checkRunPython(t, cs, s("py"), s("other")) })
			t.Run("figure", func(t *testing.T) { checkFigure(t, cs, s("fig")) })
			t.Run("run_shell", func(t *testing.T) { checkRunShell(t, cs, s("sh")) })
			t.Run("files", func(t *testing.T) { checkFiles(t, cs, s("files")) })
			t.Run("datasets", func(t *testing.T) { checkDatasets(t, cs, s("data")) })
			t.Run("lifecycle", func(t *testing.T) { checkLifecycle(t, cs, s("life"), s("never")) })
			t.Run("bad input", func(t *testing.T) { checkBadInput(t, cs, s("bad")) })
		})
	}
}

// args is a JSON object of the given name/value pairs.
func args(kv ...any) string {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func checkToolList(t *testing.T, cs *mcp.ClientSession) {
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		schema, _ := json.Marshal(tl.InputSchema)
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(schema, &s); err != nil || s.Type != "object" || s.Properties["session"] == nil {
			t.Errorf("%s: schema %s lacks a session property", tl.Name, schema)
		}
		if strings.Contains(tl.Description, "code_sandbox") {
			t.Errorf("%s: description names code_sandbox, which MCP clients do not have: %s", tl.Name, tl.Description)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, toolNames) {
		t.Errorf("tools %v, want %v", names, toolNames)
	}
}

// checkRunPython: state persists across calls naming the same session; a
// different session is a different kernel; an exception is the code's
// outcome, not a tool error.
func checkRunPython(t *testing.T, cs *mcp.ClientSession, s, other string) {
	want(t, cs, "run_python", args("code", "x = 41\nimport math", "session", s), false)
	want(t, cs, "run_python", args("code", "print(x + 1)\nmath.floor(2.5)", "session", s), false, "stdout:\n42\n", "result:\n2")
	r := want(t, cs, "run_python", args("code", "print(x)", "session", other), false, "NameError: name 'x' is not defined")
	if strings.Contains(r.text, "41") {
		t.Errorf("another session sees x:\n%s", r.text)
	}
	want(t, cs, "run_python", args("code", "1/0", "session", s), false, "ZeroDivisionError: division by zero")
	want(t, cs, "run_python", args("code", "import time\ntime.sleep(30)", "timeout_s", 1, "session", s), false, "timed out")
	want(t, cs, "run_python", args("code", "print(x)", "session", s), false, "stdout:\n41\n") // state survives the interrupt
}

// checkFigure: a figure comes back as image content (a PNG), and as an
// artifact whose signed URL list_artifacts gives.
func checkFigure(t *testing.T, cs *mcp.ClientSession, s string) {
	code := "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nprint('drawn')"
	r := want(t, cs, "run_python", args("code", code, "session", s), false, "drawn")
	if len(r.images) != 1 {
		t.Fatalf("images: %d, want 1; reply:\n%s", len(r.images), r.text)
	}
	if r.mimes[0] != "image/png" || !bytes.HasPrefix(r.images[0], []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("image %s of %d bytes starting %q, want a PNG", r.mimes[0], len(r.images[0]), r.images[0][:min(8, len(r.images[0]))])
	}
	r = want(t, cs, "list_artifacts", args("session", s), false, ".png", "token=")
	if len(r.images) != 0 {
		t.Errorf("list_artifacts returned images")
	}
	want(t, cs, "list_artifacts", args("session", s+"-none"), false, "No artifacts yet", "from run_python")
}

func checkRunShell(t *testing.T, cs *mcp.ClientSession, s string) {
	want(t, cs, "run_shell", args("command", "echo hi; pwd", "session", s), false, "exit code: 0", "hi\n/session")
	// A failing command is its outcome, not an error of the tool.
	want(t, cs, "run_shell", args("command", "exit 3", "session", s), false, "exit code: 3")
	// run_shell and run_python share the session's files.
	want(t, cs, "run_shell", args("command", "echo shared > /session/sh.txt", "session", s), false, "exit code: 0")
	want(t, cs, "run_python", args("code", "print(open('/session/sh.txt').read())", "session", s), false, "shared")
	want(t, cs, "run_shell", args("command", "pwd", "cwd", "/nonexistent", "session", s), true, "could not start")
}

func checkFiles(t *testing.T, cs *mcp.ClientSession, s string) {
	want(t, cs, "read_file", args("path", "notes.txt", "session", s), true, "no files yet") // nothing ran
	want(t, cs, "write_file", args("path", "notes.txt", "content", "hello\nworld\n", "session", s), false, "Wrote 12 B to /session/notes.txt")
	want(t, cs, "read_file", args("path", "/session/notes.txt", "session", s), false, "hello\nworld")
	want(t, cs, "list_files", args("session", s), false, "/session/notes.txt  12 B")
	want(t, cs, "run_python", args("code", "print(open('notes.txt').read().upper())", "session", s), false, "HELLO")
	want(t, cs, "write_file", args("path", "b.bin", "content", "AAEC", "encoding", "base64", "session", s), false, "Wrote 3 B")
	want(t, cs, "read_file", args("path", "b.bin", "session", s), false, "is binary", "Process it with run_python")
	// Bad paths are tool errors that say what is wrong.
	want(t, cs, "read_file", args("path", "/session/missing.txt", "session", s), true, "no such file")
	want(t, cs, "write_file", args("path", "/etc/agentbox-test", "content", "x", "session", s), true, "Could not write", "permission denied")
	want(t, cs, "read_file", args("path", "/session", "session", s), true, "it is a folder")
	want(t, cs, "list_files", args("path", "/session/notes.txt", "session", s), true, "it is a file")
	want(t, cs, "read_file", args("path", "", "session", s), true, `"path" is required`)
	want(t, cs, "read_file", args("path", "a\x00b", "session", s), true, "Could not read")
	want(t, cs, "write_file", args("path", "x.txt", "session", s), true, `"content" is required`)
	want(t, cs, "write_file", args("path", "x.bin", "content", "!!", "encoding", "base64", "session", s), true, "not valid base64")
}

func checkDatasets(t *testing.T, cs *mcp.ClientSession, s string) {
	want(t, cs, "list_datasets", args("session", s), false, "cities.csv", "/data/cities.csv")
	want(t, cs, "select_dataset", args("dataset_id", "sales", "session", s), false, "loaded at /session/data/")
	want(t, cs, "run_python", args("code", "import pandas as pd, glob\nprint(pd.read_csv(glob.glob('/session/data/sales*')[0]).amount.sum())", "session", s),
		false, "stdout:\n42\n")
	want(t, cs, "list_datasets", args("session", s), false, "sales: loaded")
	want(t, cs, "select_dataset", args("dataset_id", "no-such-dataset", "session", s), true, "could not be loaded", "no-such-dataset")
	want(t, cs, "select_dataset", args("session", s), true, `"dataset_id" is required`)
}

func checkLifecycle(t *testing.T, cs *mcp.ClientSession, s, never string) {
	want(t, cs, "session_info", args("session", never), false, fmt.Sprintf("Session %q has no sandbox yet", never))
	want(t, cs, "run_python", args("code", "y = 'kept'", "session", s), false)
	r := want(t, cs, "session_info", args("session", s), false)
	var info struct {
		Session        string `json:"session"`
		State          string `json:"state"`
		ExecutionCount int    `json:"execution_count"`
	}
	if err := json.Unmarshal([]byte(r.text), &info); err != nil {
		t.Fatalf("session_info is not JSON: %v\n%s", err, r.text)
	}
	if info.Session != s || info.State != "running" || info.ExecutionCount != 1 {
		t.Errorf("session_info: %+v, want session %q, running, 1 execution", info, s)
	}
	if strings.Contains(r.text, "local/") || strings.Contains(r.text, "container") {
		t.Errorf("session_info shows the host's key or container:\n%s", r.text)
	}
	want(t, cs, "reset_session", args("session", s), false, "was reset")
	want(t, cs, "run_python", args("code", "print(y)", "session", s), false, "NameError")
	want(t, cs, "reset_session", args("session", never), false, "nothing to reset")
	want(t, cs, "reset_session", args("session", s, "force", true), true, `unknown field "force"`)
	want(t, cs, "session_info", `[]`, true, "must be a JSON object")
}

// checkBadInput: input a tool cannot use is a tool error that says what is
// wrong, never a protocol error.
func checkBadInput(t *testing.T, cs *mcp.ClientSession, s string) {
	cases := []struct{ tool, args, want string }{
		{"run_python", args("session", s), `"code" is required`},
		{"run_python", args("code", "  ", "session", s), `"code" is required`},
		{"run_python", args("code", 5, "session", s), `field "code" must be a string`},
		{"run_python", args("code", "1", "timeout_s", -1, "session", s), `"timeout_s" must be more than 0`},
		{"run_python", args("code", "1", "timeout_s", 1e9, "session", s), `"timeout_s" must be more than 0 and at most 600`},
		{"run_python", args("code", "1", "lang", "r", "session", s), `unknown field "lang"`},
		{"run_python", args("code", "1", "session", 7), `"session" must be a string`},
		{"run_python", args("code", "1", "session", "a\nb"), `"session" holds the unprintable character`},
		{"run_python", args("code", "1", "session", strings.Repeat("s", 600)), `"session" is 600 bytes long`},
		{"run_shell", args("session", s), `"command" is required`},
		{"run_shell", args("command", "ls", "cwd", "relative", "session", s), `"cwd" must be an absolute path`},
		{"list_files", args("recursive", "yes", "session", s), `field "recursive" must be a boolean`},
		{"list_artifacts", args("all", true, "session", s), `unknown field "all"`},
	}
	for _, tc := range cases {
		want(t, cs, tc.tool, tc.args, true, tc.want)
	}
	// A null or empty session is no session: the default one.
	want(t, cs, "run_python", `{"code": "print('default')", "session": null}`, false, "default")
	want(t, cs, "run_python", `{"code": "print('empty')", "session": ""}`, false, "empty")
}
