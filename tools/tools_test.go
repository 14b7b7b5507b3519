package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/tools"
)

type testCase struct {
	name     string
	input    string
	fake     fake
	opts     tools.Options
	want     []string // substrings of the reply
	notWant  []string
	wantErr  error // the Go error, matched with errors.Is
	wantCall bool  // the manager was called
}

func key(context.Context) (string, error) { return "thread-1", nil }

func runCases(t *testing.T, tool string, cases []testCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &tc.fake
			opts := tc.opts
			if opts.SessionKey == nil {
				opts.SessionKey = key
			}
			tl := find(t, tools.New(lister{f}, opts), tool)
			got, err := tl.Call(context.Background(), json.RawMessage(tc.input))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v; reply %q", err, got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("reply lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("reply has %q:\n%s", w, got)
				}
			}
			if called := len(f.calls) > 0; called != tc.wantCall {
				t.Errorf("manager called = %v (%v), want %v", called, f.calls, tc.wantCall)
			}
		})
	}
}

func find(t *testing.T, list []tools.Tool, name string) tools.Tool {
	t.Helper()
	for _, tl := range list {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q", name)
	return tools.Tool{}
}

// badInput are the ways a model gets any tool's input wrong.
func badInput(example string) []testCase {
	return []testCase{
		{name: "not json", input: `print(1)`, want: []string{"Invalid input: the input is not valid JSON", example}},
		{name: "truncated json", input: `{"a": `, want: []string{"not valid JSON"}},
		{name: "array", input: `[1]`, want: []string{"must be a JSON object, not array"}},
		{name: "null", input: `null`, want: []string{"must be a JSON object"}},
		{name: "unknown field", input: `{"cmd": "x"}`, want: []string{`unknown field "cmd"`}},
		{name: "two objects", input: `{} {}`, want: []string{"extra data"}},
	}
}

func TestCodeSandbox(t *testing.T) {
	long := strings.Repeat("é", 500) // 1000 bytes
	cases := []testCase{
		{name: "stdout", input: `{"code": "print(1)"}`, wantCall: true,
			fake: fake{result: &session.Result{Stdout: "1\n"}},
			want: []string{"stdout:\n1\n"}, notWant: []string{"stderr", "notes"}},
		{name: "result and timeout", input: `{"code": "6*7", "timeout_s": 2.5}`, wantCall: true,
			fake: fake{result: &session.Result{Outputs: []kernel.Output{
				{Kind: "display_data", Data: map[string]string{"text/plain": "shown"}},
				{Kind: "execute_result", Data: map[string]string{"text/plain": "42"}},
			}}},
			want: []string{"result:\n42"}, notWant: []string{"shown"}},
		{name: "no output", input: `{"code": "x = 1"}`, wantCall: true, want: []string{"produced no output"}},
		{name: "exception", input: `{"code": "1/0"}`, wantCall: true,
			fake: fake{result: &session.Result{Stderr: "warn\n", Error: &kernel.Exception{
				Name: "ZeroDivisionError", Value: "division by zero",
				Traceback: []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"},
			}}},
			want:    []string{"stderr:\nwarn\n", "error:\nt3\n", "t8\nZeroDivisionError: division by zero"},
			notWant: []string{"t2"}},
		{name: "artifacts and notes", input: `{"code": "plot()"}`, wantCall: true,
			fake: fake{result: &session.Result{
				Artifacts:        []session.Artifact{{Name: "fig\n1.png", MIME: "image/png", Size: 2048, URL: "http://x/a/1"}},
				SkippedArtifacts: []session.Skipped{{Name: "big.bin", Reason: "too large"}},
				TimedOut:         true, StateLost: true, RestartReason: "out of memory",
				Truncated: map[string]int64{"stdout": 99},
			}},
			want: []string{`- "fig\n1.png" (image/png, 2.0 KiB): http://x/a/1`, "timed out", "out of memory",
				"variables and imports from earlier calls are gone", "big.bin was not saved as an artifact: too large",
				"cut 99 bytes from the middle of stdout"}},
		{name: "long output cut", input: `{"code": "print('é'*500)"}`, wantCall: true,
			opts: tools.Options{MaxReplyBytes: 100},
			fake: fake{result: &session.Result{Stdout: long, Stderr: long}},
			want: []string{"[... 900 bytes cut ...]", "stdout:\n" + long[:50] + "\n[...", "stderr:\n"}},
		{name: "session lost", input: `{"code": "1"}`, wantCall: true,
			fake: fake{err: &session.Error{Op: "exec", Key: "k", Err: session.ErrSessionLost}},
			want: []string{"sandbox was lost"}},
		{name: "system failure", input: `{"code": "1"}`, wantCall: true,
			fake: fake{err: session.ErrUnavailable}, wantErr: session.ErrUnavailable},
		{name: "session key fails", input: `{"code": "1"}`, wantErr: errNoKey,
			opts: tools.Options{SessionKey: func(context.Context) (string, error) { return "", errNoKey }}},
		{name: "missing code", input: `{}`, want: []string{`"code" is required`}},
		{name: "empty code", input: `{"code": "  "}`, want: []string{`"code" is required`}},
		{name: "code not a string", input: `{"code": 1}`, want: []string{`field "code" must be a string, not number`}},
		{name: "timeout not a number", input: `{"code": "1", "timeout_s": "5"}`, want: []string{`field "timeout_s" must be a number, not string`}},
		{name: "timeout negative", input: `{"code": "1", "timeout_s": -1}`, want: []string{`"timeout_s" must be more than 0 and at most 600`}},
		{name: "timeout too long", input: `{"code": "1", "timeout_s": 601}`, want: []string{"at most 600"}},
	}
	runCases(t, "code_sandbox", append(cases, badInput("print(math.pi)")...))
}

var errNoKey = errors.New("no thread id")

func TestCodeSandboxOptions(t *testing.T) {
	f := &fake{}
	tl := find(t, tools.New(f, tools.Options{}), "code_sandbox")
	ctx := tools.WithCallID(context.Background(), "call_1")
	if _, err := tl.Call(ctx, json.RawMessage(`{"code": "1", "timeout_s": 3}`)); err != nil {
		t.Fatal(err)
	}
	if f.nopts != 2 || f.calls[0] != "exec default 1" {
		t.Errorf("calls %v with %d options, want exec on key default with timeout and id", f.calls, f.nopts)
	}
}

func TestListDatasets(t *testing.T) {
	cases := []testCase{
		{name: "files and statuses", input: `{}`, wantCall: true,
			fake: fake{listing: session.Listing{
				Files: []session.DatasetInfo{{Info: datasets.Info{Name: "sales.csv", Path: "/data/sales.csv", Size: 10, Format: datasets.FormatCSV, CSVHeader: []string{"id", "amount"}}, Source: "local"}},
				Statuses: []datasets.Record{
					{DatasetID: "a", Name: "a.parquet", Status: datasets.StatusLoaded, Size: 4096},
					{DatasetID: "b", Name: "b", Status: datasets.StatusFailed, Reason: "HTTP 404"},
					{DatasetID: "c", Name: "c", Status: datasets.StatusPending},
				},
			}},
			want: []string{"sales.csv: 10 B", "columns: id, amount", "path: /data/sales.csv",
				"a: loaded at /session/data/a.parquet (4.0 KiB)", "b: could not be loaded: HTTP 404", "c: pending"}},
		{name: "empty input is {}", input: ``, wantCall: true,
			fake: fake{listing: session.Listing{Message: "No datasets: DATASET_ACCESS=NONE."}},
			want: []string{"DATASET_ACCESS=NONE"}},
		{name: "nothing", input: ` {} `, wantCall: true, want: []string{"No datasets are available."}},
		{name: "long listing cut", input: `{}`, wantCall: true, opts: tools.Options{MaxReplyBytes: 64},
			fake: fake{listing: session.Listing{Message: strings.Repeat("x", 1000)}},
			want: []string{"bytes cut ...]"}},
		{name: "system failure", input: `{}`, wantCall: true, fake: fake{err: session.ErrClosed}, wantErr: session.ErrClosed},
	}
	runCases(t, "list_datasets", append(cases, badInput("{}")...))
}

func TestSelectDataset(t *testing.T) {
	cases := []testCase{
		{name: "loaded", input: `{"dataset_id": "sales"}`, wantCall: true,
			fake: fake{sel: session.Selection{Path: "/session/data/sales.parquet",
				Record: datasets.Record{DatasetID: "sales", Status: datasets.StatusLoaded, Size: 5}}},
			want: []string{"Dataset sales: loaded at /session/data/sales.parquet (5 B)."}},
		{name: "unknown dataset", input: `{"dataset_id": "nope"}`, wantCall: true,
			fake: fake{sel: session.Selection{Record: datasets.Record{DatasetID: "nope", Status: datasets.StatusFailed, Reason: `fetch dataset "nope": HTTP 404: not found`}}},
			want: []string{"nope: could not be loaded: fetch dataset"}},
		{name: "invalid id", input: `{"dataset_id": "a\u0000b"}`, wantCall: true,
			fake: fake{err: fmt.Errorf("select dataset: %w", datasets.ErrInvalidID)},
			want: []string{"is not a valid dataset id"}},
		{name: "no source", input: `{"dataset_id": "x"}`, wantCall: true,
			fake: fake{err: session.ErrNoDatasetSource}, want: []string{"no dataset source is configured"}},
		{name: "system failure", input: `{"dataset_id": "x"}`, wantCall: true,
			fake: fake{err: session.ErrUnavailable}, wantErr: session.ErrUnavailable},
		{name: "missing id", input: `{}`, want: []string{`"dataset_id" is required`}},
		{name: "id not a string", input: `{"dataset_id": ["x"]}`, want: []string{`"dataset_id" must be a string, not array`}},
	}
	runCases(t, "select_dataset", append(cases, badInput("sales-2024")...))
}

// TestSelectDatasetRefresh passes refresh on to the Manager as an option,
// and only when the model asks for it.
func TestSelectDatasetRefresh(t *testing.T) {
	for input, want := range map[string]int{
		`{"dataset_id": "sales", "refresh": true}`:  1,
		`{"dataset_id": "sales", "refresh": false}`: 0,
		`{"dataset_id": "sales"}`:                   0,
	} {
		f := &fake{sel: session.Selection{Record: datasets.Record{DatasetID: "sales", Status: datasets.StatusLoaded}}}
		tl := find(t, tools.New(f, tools.Options{SessionKey: key}), "select_dataset")
		if _, err := tl.Call(context.Background(), json.RawMessage(input)); err != nil {
			t.Fatal(err)
		}
		if f.nopts != want {
			t.Errorf("%s: %d options, want %d", input, f.nopts, want)
		}
	}
	f := &fake{}
	tl := find(t, tools.New(f, tools.Options{SessionKey: key}), "select_dataset")
	if got, _ := tl.Call(context.Background(), json.RawMessage(`{"dataset_id": "x", "refresh": "yes"}`)); !strings.Contains(got, `"refresh" must be a boolean`) {
		t.Errorf("refresh as a string: %q", got)
	}
}

func TestExportDataset(t *testing.T) {
	exp := session.Export{HostPath: "/srv/export/r-1.csv", Artifact: session.Artifact{Name: "exports/r-1.csv", Size: 3, URL: "http://x/a/2"}}
	cases := []testCase{
		{name: "exported", input: `{"path": "/session/data/r.csv"}`, wantCall: true, fake: fake{export: exp},
			want: []string{"Exported /session/data/r.csv (3 B) as exports/r-1.csv: http://x/a/2"}, notWant: []string{"/srv"}},
		{name: "missing file", input: `{"path": "/session/nope.csv"}`, wantCall: true,
			fake: fake{err: fmt.Errorf("export /session/nope.csv: %w",
				&fs.PathError{Op: "openat", Path: "/srv/agentbox/sessions/s-1/workspace/nope.csv", Err: fs.ErrNotExist})},
			want: []string{"Could not export /session/nope.csv: there is no such file."}, notWant: []string{"/srv", "openat"}},
		{name: "not a regular file", input: `{"path": "/session/fifo"}`, wantCall: true,
			fake: fake{err: fmt.Errorf("export /session/fifo: %w", session.ErrNotRegular)},
			want: []string{"Could not export /session/fifo: it is not a regular file"}},
		{name: "exports full", input: `{"path": "/session/a"}`, wantCall: true,
			fake: fake{err: fmt.Errorf("export /session/a: %w on the host's disk: the file would eat into DISK_RESERVE_MB=512 MiB", session.ErrNoSpace)},
			want: []string{"Could not export /session/a: no room is left on the host for exports"}, notWant: []string{"DISK_RESERVE_MB"}},
		{name: "host folder refused", input: `{"path": "/session/a"}`, wantCall: true,
			fake:    fake{err: fmt.Errorf("export /session/a: %w", &fs.PathError{Op: "mkdir", Path: "/srv/exports", Err: fs.ErrPermission})},
			wantErr: fs.ErrPermission},
		{name: "no session", input: `{"path": "/session/a"}`, wantCall: true,
			fake: fake{err: &session.Error{Op: "export", Err: session.ErrNotFound}}, want: []string{"has not run any code yet"}},
		{name: "system failure", input: `{"path": "/session/a"}`, wantCall: true,
			fake: fake{err: &session.Error{Op: "export", Err: session.ErrUnavailable}}, wantErr: session.ErrUnavailable},
		{name: "outside session", input: `{"path": "/etc/passwd"}`, want: []string{"/etc/passwd is not a file under /session"}},
		{name: "escape", input: `{"path": "/session/../etc/passwd"}`, want: []string{"not a file under /session"}},
		{name: "relative", input: `{"path": "data/r.csv"}`, want: []string{"not a file under /session"}},
		{name: "missing path", input: `{}`, want: []string{`"path" is required`}},
		{name: "path not a string", input: `{"path": true}`, want: []string{`"path" must be a string, not bool`}},
	}
	runCases(t, "export_dataset", append(cases, badInput("/session/data/result.parquet")...))
}

func TestListArtifacts(t *testing.T) {
	cases := []testCase{
		{name: "some", input: `{}`, wantCall: true,
			fake: fake{arts: []session.Artifact{{Name: "a.png", MIME: "image/png", Size: 1, URL: "http://x/1"}}},
			want: []string{"- a.png (image/png, 1 B): http://x/1"}},
		{name: "none", input: `{}`, wantCall: true, want: []string{"No artifacts yet"}},
		{name: "system failure", input: `{}`, wantCall: true, fake: fake{err: session.ErrClosed}, wantErr: session.ErrClosed},
	}
	runCases(t, "list_artifacts", append(cases, badInput("{}")...))
}

func TestNew(t *testing.T) {
	var names []string
	for _, tl := range tools.New(&fake{}, tools.Options{}) {
		names = append(names, tl.Name)
		var schema map[string]any
		if err := json.Unmarshal(tl.Schema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: schema %s: %v", tl.Name, tl.Schema, err)
		}
		if tl.Description == "" || tl.Call == nil {
			t.Errorf("%s: no description or call", tl.Name)
		}
	}
	if got := strings.Join(names, ","); got != "code_sandbox,list_datasets,select_dataset,export_dataset" {
		t.Errorf("tools %s", got)
	}
	if n := len(tools.New(lister{&fake{}}, tools.Options{})); n != 5 {
		t.Errorf("with an ArtifactLister: %d tools, want 5", n)
	}
}

// *session.Manager must satisfy Manager.
var _ tools.Manager = (*session.Manager)(nil)
