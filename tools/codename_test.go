package tools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/tools"
)

// every is a fake with every optional capability.
type every struct{ files }

func (e every) Artifacts(_ context.Context, key string) ([]session.Artifact, error) {
	e.record("artifacts " + key)
	return e.arts, e.err
}

func (e every) Run(_ context.Context, key string, cmd session.Command) (*session.CommandResult, error) {
	e.record("run " + key + " " + cmd.Line)
	return &session.CommandResult{}, nil
}

// TestCodeToolName: the code tool is offered under CodeToolName, and no
// description or reply sends the model to a tool of another name.
func TestCodeToolName(t *testing.T) {
	f := every{newFiles(nil)}
	f.list = &session.FileList{Path: "/session", Truncated: true,
		Entries: []session.FileInfo{{Path: "/session/a", Type: session.TypeFile}}}
	f.listing = session.Listing{Files: []session.DatasetInfo{{}}}
	list := tools.New(f, tools.Options{CodeToolName: "run_python", SessionKey: key})
	names := map[string]bool{}
	for _, tl := range list {
		names[tl.Name] = true
		if strings.Contains(tl.Description, "code_sandbox") {
			t.Errorf("%s's description names code_sandbox: %s", tl.Name, tl.Description)
		}
	}
	if !names["run_python"] || names["code_sandbox"] {
		t.Fatalf("tools %v: want run_python, not code_sandbox", names)
	}
	for _, tc := range []struct{ tool, input, want string }{
		{"list_artifacts", `{}`, "from run_python."},
		{"list_files", `{}`, "use run_python to search"},
		{"list_datasets", `{}`, "read them from run_python"},
	} {
		got, err := callTool(t, find(t, list, tc.tool), tc.input)
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		if !strings.Contains(got, tc.want) || strings.Contains(got, "code_sandbox") {
			t.Errorf("%s reply %q: want %q and no code_sandbox", tc.tool, got, tc.want)
		}
	}
	for _, tl := range tools.New(f, tools.Options{}) {
		if tl.Name == "run_python" {
			t.Error("run_python offered by default")
		}
	}
}
