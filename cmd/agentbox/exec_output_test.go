package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// TestPrinterFigureOnce: a returned figure is printed once, whether its
// result streamed or is replayed; other results are all printed.
func TestPrinterFigureOnce(t *testing.T) {
	const repr = "<Figure size 640x480 with 1 Axes>"
	figure := kernel.Output{Kind: "execute_result", Data: map[string]string{"text/plain": repr}}
	png := kernel.Output{Kind: "display_data", Data: map[string]string{"image/png": "AAAA", "text/plain": repr}}
	value := kernel.Output{Kind: "execute_result", Data: map[string]string{"text/plain": "[<matplotlib.lines.Line2D at 0x7f>]"}}
	tests := []struct {
		name    string
		outputs []kernel.Output
		want    string
	}{
		{"returned figure", []kernel.Output{figure, png}, repr + "\n"},
		{"figure of a subclass, fractional size", []kernel.Output{
			{Kind: "execute_result", Data: map[string]string{"text/plain": "<matplotlib.figure.SubFigure size 614.4x460.8 with 2 Axes>"}}, png},
			repr + "\n"},
		{"another value, then the figure", []kernel.Output{value, png}, value.Data["text/plain"] + "\n" + repr + "\n"},
		{"a closed figure returned", []kernel.Output{figure}, repr + "\n"},
		{"figure then two open figures", []kernel.Output{figure, png, png}, repr + "\n" + repr + "\n"},
	}
	for _, tt := range tests {
		for _, streamed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s streamed %v", tt.name, streamed), func(t *testing.T) {
				var stdout, stderr strings.Builder
				p := newPrinter(&stdout, &stderr, false)
				if streamed {
					for _, o := range tt.outputs {
						p.event(kernel.Event{Type: kernel.EventDisplay, Kind: o.Kind, Data: o.Data})
					}
				}
				p.finish(&session.Result{Outputs: tt.outputs})
				if stdout.String() != tt.want {
					t.Errorf("stdout = %q, want %q", stdout.String(), tt.want)
				}
			})
		}
	}
}

// TestArtifactNotes: the first artifacts are listed with their URLs, the
// rest counted; --quiet lists none.
func TestArtifactNotes(t *testing.T) {
	arts := func(n int) []session.Artifact {
		var out []session.Artifact
		for i := range n {
			out = append(out, session.Artifact{Name: fmt.Sprintf("f%d.txt", i), Size: 1024, URL: fmt.Sprintf("http://x/%d?token=%s", i, strings.Repeat("t", 200))})
		}
		return out
	}
	tests := []struct {
		name  string
		n     int
		quiet bool
		urls  int
		more  string
	}{
		{"few", 3, false, 3, ""},
		{"one over the limit is listed", 6, false, 6, ""},
		{"many", 40, false, 5, "agentbox: 35 more artifacts (35.0 KiB; exec --json lists them with their URLs)\n"},
		{"quiet", 40, true, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w strings.Builder
			writeNotes(&w, &session.Result{Artifacts: arts(tt.n)}, tt.quiet)
			got := w.String()
			if n := strings.Count(got, "http://x/"); n != tt.urls {
				t.Errorf("%d URLs listed, want %d:\n%s", n, tt.urls, got)
			}
			if tt.more != "" && !strings.HasSuffix(got, tt.more) {
				t.Errorf("notes do not end with %q:\n%s", tt.more, got)
			}
			if tt.more == "" && strings.Contains(got, "more artifacts") {
				t.Errorf("notes count artifacts they list:\n%s", got)
			}
		})
	}
}

// TestExecJSONFailure: with --json, stdout is one JSON object even when
// the code could not run, its error saying why; stderr says it too.
func TestExecJSONFailure(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("ARTIFACTS_DB", filepath.Join(t.TempDir(), "artifacts.db"))
	tests := []struct {
		name string
		env  map[string]string
		args []string
		exit int
		kind string
		msg  string
	}{
		{"configuration", map[string]string{"EXEC_TIMEOUT_S": "soon"}, []string{"exec", "--json", "--id", "c1", "1"},
			exitUsage, "usage", "EXEC_TIMEOUT_S"},
		{"no code", nil, []string{"exec", "--json", "--session", "s", " "}, exitUsage, "usage", "no code to run"},
		{"engine unreachable", map[string]string{"DOCKER_HOST": "unix:///nonexistent/docker.sock"}, []string{"exec", "--json", "1"},
			exitSandbox, "sandbox", "docker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			r := agentbox(t, "", tt.args...)
			if r.code != tt.exit {
				t.Errorf("exit %d, want %d: %s", r.code, tt.exit, r.stderr)
			}
			oneErrorLine(t, r.stderr)
			if strings.Count(r.stdout, "\n") != 1 {
				t.Fatalf("stdout is not one line: %q", r.stdout)
			}
			var got struct {
				Session string
				ID      string
				Error   struct{ Kind, Message string }
			}
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("stdout is not one JSON object: %v: %q", err, r.stdout)
			}
			if got.Error.Kind != tt.kind || !strings.Contains(strings.ToLower(got.Error.Message), strings.ToLower(tt.msg)) {
				t.Errorf("error = %+v, want kind %s and a message naming %q", got.Error, tt.kind, tt.msg)
			}
			if want := strings.TrimSpace(strings.TrimPrefix(r.stderr, "agentbox: ")); got.Error.Message != want {
				t.Errorf("message %q, stderr says %q", got.Error.Message, want)
			}
		})
	}
}

// TestExecOnTheEngineOutput: a returned figure prints once, and an id
// reused for other code says so once, also with --json.
func TestExecOnTheEngineOutput(t *testing.T) {
	sandboxEnv(t)
	r := agentbox(t, "", "exec", "--quiet", "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\nfig")
	if r.code != exitOK || r.stdout != "<Figure size 640x480 with 1 Axes>\n" {
		t.Errorf("returned figure: exit %d, stdout %q, want it once: %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "artifact") {
		t.Errorf("--quiet listed artifacts: %s", r.stderr)
	}

	if r := agentbox(t, "", "exec", "--id", "call-9", "x = 1"); r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	r = agentbox(t, "", "exec", "--id", "call-9", "x = 2")
	oneErrorLine(t, r.stderr)
	if r.code != exitUsage || strings.Count(r.stderr, "call-9") != 1 || strings.Count(r.stderr, "already used for different code") != 1 {
		t.Errorf("id conflict: exit %d, stderr %q, want %d, the id and the reason once each", r.code, r.stderr, exitUsage)
	}
	r = agentbox(t, "", "exec", "--json", "--id", "call-9", "x = 2")
	var got struct {
		Error struct{ Kind, Message string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Error.Kind != "usage" || !strings.Contains(got.Error.Message, "call-9") {
		t.Errorf("--json id conflict: %v, stdout %q", err, r.stdout)
	}

}
