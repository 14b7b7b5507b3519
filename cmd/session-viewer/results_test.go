package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// png is the base64 text of an "image" of n bytes.
func png(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }

// historySession records, in the database the configuration names, a
// stopped session whose executions return every kind of rich result: a
// trailing expression, a figure stored as an artifact, HTML alone, HTML
// beside text, an image too large to keep, an unknown type. It returns the
// store, open, and the session's id.
func historySession(t *testing.T, key string) (*store.Store, string) {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, os.Getenv("ARTIFACTS_DB"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ns, id := os.Getenv(namespaceEnv), session.ID(key)
	t0 := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	if err := st.PutSession(ctx, store.Session{Namespace: ns, ID: id, Key: key, ContainerID: "0123456789abcdef0123",
		Image: "agentbox-sandbox:latest", Storage: "TMPFS", Created: t0, LastUsed: t0,
		Limits: map[string]string{"memory_mb": "1024"}}); err != nil {
		t.Fatal(err)
	}
	figure := make([]byte, 24<<10)
	sum := sha256.Sum256(figure)
	fig, err := artifacts.NewIndex(st).Add(ctx, artifacts.Artifact{Namespace: ns, SessionID: id, SessionKey: key,
		Name: "figures/cell-3-1.png", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(figure)), MIME: "image/png"})
	if err != nil {
		t.Fatal(err)
	}
	figArts, _ := json.Marshal([]session.Artifact{{ID: fig.ID, Name: fig.Name, Size: fig.Size, SHA256: fig.SHA256, MIME: fig.MIME}})
	record := func(n int, code string, outs []kernel.Output, arts []byte) {
		t.Helper()
		if err := st.RecordExecution(ctx, &store.Execution{Namespace: ns, SessionID: id, SessionKey: key,
			ExecID: "e" + string(rune('0'+n)), ExecutionCount: n, Code: code, Outputs: outs, Artifacts: arts,
			Started: t0.Add(time.Duration(n) * time.Minute), Duration: 2500 * time.Microsecond}); err != nil {
			t.Fatal(err)
		}
	}
	record(1, "y = 41", nil, nil)
	record(2, "y + 1", []kernel.Output{{Kind: "execute_result", Data: map[string]string{"text/plain": "42"}}}, nil)
	record(3, "plt.plot([1, 2]); plt.show()", []kernel.Output{{Kind: "display_data",
		Data: map[string]string{"image/png": base64.StdEncoding.EncodeToString(figure), "text/plain": "<Figure size 640x480 with 1 Axes>"}}}, figArts)
	record(4, "HTML('<b>bold</b> &amp; more')", []kernel.Output{{Kind: "execute_result",
		Data: map[string]string{"text/html": "<style>b {color: red}</style><table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>x &lt; y</td></tr></table><p>two<br>lines</p>"}}}, nil)
	record(5, "df", []kernel.Output{{Kind: "execute_result",
		Data: map[string]string{"text/html": "<table>...</table>", "text/plain": "   a\n0  1"}}}, nil)
	record(6, "big_figure()", []kernel.Output{
		{Kind: "display_data", Data: map[string]string{"image/png": "[image/png: 409600 bytes, not kept in history]", "text/plain": "<Figure>"}},
		{Kind: "display_data", Data: map[string]string{"image/jpeg": png(1000)}},
		{Kind: "display_data", Data: map[string]string{"application/vnd.custom+json": `{"a": 1}`}},
	}, nil)
	if err := st.StopSession(ctx, ns, id, t0.Add(10*time.Minute), "stopped"); err != nil {
		t.Fatal(err)
	}
	return st, id
}

// offline points the viewer at an engine that is not there, so a view
// from the history is the same on every machine.
func offline(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
}

var (
	tokenRE = regexp.MustCompile(`token=[A-Za-z0-9._-]+`)
	artIDRE = regexp.MustCompile(`/artifacts/[A-Za-z0-9]+`)
)

func maskURLs(s string) string {
	return artIDRE.ReplaceAllString(tokenRE.ReplaceAllString(s, "token=TOKEN"), "/artifacts/ID")
}

// TestKeyResultsGolden shows the results the history recorded: the value
// of a trailing expression, figures as their size with the artifact that
// stores them and a fresh URL, HTML as text, images not kept, other types
// by size.
func TestKeyResultsGolden(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	isolate(t)
	offline(t)
	historySession(t, "results")
	r := viewer(t, "--no-state", "results")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	t.Chdir(wd) // isolate left it: the golden file is here
	out := strings.ReplaceAll(r.stdout, os.Getenv(namespaceEnv), "NAMESPACE")
	golden(t, "results.golden", maskURLs(mask(out, "\x00")))

	r = viewer(t, "--json", "--no-state", "results")
	var v view
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if len(v.Executions) != 6 {
		t.Fatalf("want 6 executions, got %d", len(v.Executions))
	}
	if e := v.Executions[1]; len(e.Results) != 1 || e.Results[0].Kind != "execute_result" || e.Results[0].Data["text/plain"] != "42" {
		t.Errorf("--json: y + 1 shows results %+v", e.Results)
	}
	fig := v.Executions[2].Results[0].Figure
	if fig == nil || fig.Name != "figures/cell-3-1.png" || fig.Size != 24<<10 || !strings.Contains(fig.URL, "/artifacts/"+fig.ID+"?token=") || fig.Expires == nil {
		t.Errorf("--json: figure %+v, want its artifact with a fresh URL", fig)
	}
	if got := v.Executions[0].Results; got == nil || len(got) != 0 {
		t.Errorf("--json: no results must be [], got %#v", got)
	}

	// --no-artifacts signs nothing: the figure is named, without a URL.
	r = viewer(t, "--no-artifacts", "--no-state", "results")
	if !strings.Contains(r.stdout, "[image/png, 24.0 KiB] figures/cell-3-1.png\n") || strings.Contains(r.stdout, "token=") {
		t.Errorf("--no-artifacts:\n%s", r.stdout)
	}
}

// TestKeyFollowResults prints the results of executions recorded after
// the view, in text and in --json.
func TestKeyFollowResults(t *testing.T) {
	isolate(t)
	offline(t)
	st, id := historySession(t, "follow")
	for _, asJSON := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr syncBuffer
		done := make(chan int)
		args := []string{"--follow", "--no-state", "follow"}
		if asJSON {
			args = append(args, "--json")
		}
		go func() { done <- run(ctx, args, nil, &stdout, &stderr) }()
		time.Sleep(700 * time.Millisecond)
		n := 7
		if asJSON {
			n = 8
		}
		if err := st.RecordExecution(t.Context(), &store.Execution{Namespace: os.Getenv(namespaceEnv), SessionID: id, SessionKey: "follow",
			ExecID: "new" + string(rune('0'+n)), ExecutionCount: n, Code: "6 * 7", Started: time.Now(),
			Outputs: []kernel.Output{{Kind: "execute_result", Data: map[string]string{"text/plain": "4242"}}}}); err != nil {
			t.Fatal(err)
		}
		want := "  result:\n    4242\n"
		if asJSON {
			want = `"results":[{"kind":"execute_result","data":{"text/plain":"4242"}}]`
		}
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(stdout.String(), want) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--follow (json %v) lacks %q:\n%s", asJSON, want, stdout.String())
		}
	}
}

// TestDirResults shows the results session.log recorded, with the figure's
// URL as the log has it.
func TestDirResults(t *testing.T) {
	dir := bindFolder(t)
	appendLog(t, dir, session.LogEntry{Time: time.Now(), ID: "e5", ExecutionCount: 5, Code: "y + 1",
		Results: []kernel.Output{{Kind: "execute_result", Data: map[string]string{"text/plain": "42"}},
			{Kind: "display_data", Data: map[string]string{"image/png": png(3 << 10), "text/plain": "<Figure>"}}},
		Artifacts: []session.Artifact{{ID: "fig1", Name: "figures/cell-5-1.png", Size: 3 << 10, MIME: "image/png",
			URL: "http://localhost:8000/artifacts/fig1?token=T"}}})
	r := viewer(t, "--dir", dir)
	for _, want := range []string{
		"  result:\n    42\n",
		"  display:\n    [image/png, 3.0 KiB] figures/cell-5-1.png\n    http://localhost:8000/artifacts/fig1?token=T (as recorded)\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--dir lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestHTMLText(t *testing.T) {
	for in, want := range map[string]string{
		"<b>bold</b> &amp; more":                       "bold & more",
		"<p>one</p><p>two<br/>three</p>":               "one\ntwo\nthree",
		"<script>alert(1)</script><div>x&nbsp;y</div>": "x y",
		"<!-- c --><table><tr><td>1</td><td>2</td></tr><tr><td>3</td><td>4</td></tr></table>": "1  2\n3  4",
	} {
		if got := htmlText(in); got != want {
			t.Errorf("htmlText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestResultsEscapeSandboxText prints results whose every part the
// sandbox could have chosen, figures and HTML included.
func TestResultsEscapeSandboxText(t *testing.T) {
	var sb strings.Builder
	p := &printer{w: &sb}
	fig := &artifactView{Name: hostile, URL: hostile}
	for _, r := range []resultView{
		{Kind: hostile, Data: map[string]string{"image/png": hostile, "image/" + hostile: hostile}, Figure: fig},
		{Kind: "execute_result", Data: map[string]string{"text/html": "<p>" + hostile + "</p>"}},
		{Kind: "execute_result", Data: map[string]string{"text/markdown": hostile}},
		{Kind: "execute_result", Data: map[string]string{"text/plain": hostile}},
	} {
		p.result(r)
	}
	checkTerminalSafe(t, "results", sb.String())
	if !strings.Contains(sb.String(), `\x1b]52;c;aGk=`) {
		t.Errorf("the results do not show the escaped text:\n%s", sb.String())
	}
}
