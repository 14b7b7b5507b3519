package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
	"github.com/agentbox/agentbox/tools"
)

// reply runs tool on input over m and returns its text.
func reply(t *testing.T, m tools.Manager, opts tools.Options, tool, input string) string {
	t.Helper()
	got, err := find(t, tools.New(m, opts), tool).Call(context.Background(), json.RawMessage(input))
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return got
}

// tracebackOf is a traceback as the kernel sends it: Python's lines, the
// exception line last, then what follows it.
func tracebackOf(frames int, last ...string) []string {
	tb := []string{"Traceback (most recent call last):"}
	for i := 1; i <= frames; i++ {
		tb = append(tb, fmt.Sprintf(`  File "<cell-1>", line %d, in f%d`, i, i), fmt.Sprintf("    f%d()", i+1))
	}
	return append(tb, last...)
}

// TestExceptionReply: the exception line appears once, as Python prints
// it, whether or not the traceback ends with it.
func TestExceptionReply(t *testing.T) {
	cases := []struct {
		name      string
		err       kernel.Exception
		want      []string // each exactly once
		notWant   []string
		wantLines int // of the error part; 0: not checked
	}{
		{name: "zero division",
			err: kernel.Exception{Name: "ZeroDivisionError", Value: "division by zero",
				Traceback: tracebackOf(1, "ZeroDivisionError: division by zero")},
			want: []string{"ZeroDivisionError: division by zero", "Traceback (most recent call last):", `File "<cell-1>", line 1`}},
		{name: "keyboard interrupt after a timeout",
			err:     kernel.Exception{Name: "KeyboardInterrupt", Traceback: tracebackOf(1, "KeyboardInterrupt")},
			want:    []string{"KeyboardInterrupt"},
			notWant: []string{"KeyboardInterrupt:"}},
		{name: "keyboard interrupt without traceback",
			err:     kernel.Exception{Name: "KeyboardInterrupt"},
			want:    []string{"error:\nKeyboardInterrupt\n"},
			notWant: []string{"KeyboardInterrupt:"}},
		{name: "no traceback",
			err:  kernel.Exception{Name: "KeyboardInterrupt", Value: "interrupted before it started"},
			want: []string{"error:\nKeyboardInterrupt: interrupted before it started\n"}},
		{name: "exception of a module",
			err: kernel.Exception{Name: "JSONDecodeError", Value: "Expecting value: line 1 column 1 (char 0)",
				Traceback: tracebackOf(2, "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)")},
			want:    []string{"json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"},
			notWant: []string{"\nJSONDecodeError:"}},
		{name: "multi-line value and a note",
			err: kernel.Exception{Name: "ValueError", Value: "bad\nrow 3",
				Traceback: tracebackOf(1, "ValueError: bad", "row 3", "while loading sales.csv")},
			want: []string{"ValueError: bad\nrow 3\nwhile loading sales.csv\n"}},
		{name: "long traceback keeps the last frames and the exception",
			err: kernel.Exception{Name: "RecursionError", Value: "maximum recursion depth exceeded",
				Traceback: tracebackOf(40, "RecursionError: maximum recursion depth exceeded")},
			want:      []string{"f40()", "f41()", "RecursionError: maximum recursion depth exceeded"},
			notWant:   []string{"f37()", "Traceback (most recent call last)"},
			wantLines: 6 + 1},
		{name: "syntax error",
			err: kernel.Exception{Name: "SyntaxError", Value: "invalid syntax (<cell-2>, line 1)",
				Traceback: []string{`  File "<cell-2>", line 1`, "    1 +", "       ^", "SyntaxError: invalid syntax"}},
			want:    []string{"    1 +\n       ^\nSyntaxError: invalid syntax\n"},
			notWant: []string{"SyntaxError: invalid syntax (<cell-2>"}},
		{name: "a traceback that does not name it",
			err: kernel.Exception{Name: "ExceptionGroup", Value: "two (2 sub-exceptions)",
				Traceback: []string{"  + Exception Group Traceback (most recent call last):", "  | ExceptionGroup: two (2 sub-exceptions)", "    | ValueError: 1"}},
			want: []string{"    | ValueError: 1\nExceptionGroup: two (2 sub-exceptions)\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{result: &session.Result{Error: &tc.err}}
			got := reply(t, f, tools.Options{}, "code_sandbox", `{"code": "f()"}`)
			for _, w := range tc.want {
				if n := strings.Count(got, w); n != 1 {
					t.Errorf("reply has %q %d times, want once:\n%s", w, n, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("reply has %q:\n%s", w, got)
				}
			}
			if tc.wantLines > 0 {
				part := strings.TrimSuffix(strings.TrimPrefix(got, "error:\n"), "\n")
				if n := len(strings.Split(part, "\n")); n != tc.wantLines {
					t.Errorf("error part has %d lines, want %d:\n%s", n, tc.wantLines, got)
				}
			}
		})
	}
}

// artifactsOf makes n artifacts named like name%d with URLs of about 200
// bytes, as signed ones are.
func artifactsOf(n int, name string) []session.Artifact {
	arts := make([]session.Artifact, n)
	for i := range arts {
		id := fmt.Sprintf("id%04d", i)
		arts[i] = session.Artifact{ID: id, Name: fmt.Sprintf(name, i), MIME: "text/csv", Size: 100,
			URL: "http://localhost:8000/artifacts/" + id + "?token=" + strings.Repeat("x", 160) + ".end"}
	}
	return arts
}

var urlRE = regexp.MustCompile(`http://localhost:8000/artifacts/id[0-9]{4}\?token=x*(\.end)?`)

// checkWholeURLs fails for a URL in reply that is not whole.
func checkWholeURLs(t *testing.T, reply string) int {
	t.Helper()
	urls := urlRE.FindAllStringSubmatch(reply, -1)
	for _, u := range urls {
		if u[1] == "" {
			t.Errorf("a URL is cut: %s", u[0])
		}
	}
	return len(urls)
}

// TestArtifactListReply: list_artifacts lists each name once, in its latest
// version, whole lines only, and says what it left out; code_sandbox lists
// an execution's artifacts the same way.
func TestArtifactListReply(t *testing.T) {
	t.Run("latest version of each name", func(t *testing.T) {
		f := &fake{arts: []session.Artifact{ // newest first, as the Manager lists
			{Name: "report.csv", MIME: "text/csv", Size: 30, URL: "http://x/v3"},
			{Name: "fit.png", MIME: "image/png", Size: 2048, URL: "http://x/png"},
			{Name: "report.csv", MIME: "text/csv", Size: 20, URL: "http://x/v2"},
			{Name: "report.csv", MIME: "text/csv", Size: 10, URL: "http://x/v1"},
		}}
		got := reply(t, lister{f}, tools.Options{}, "list_artifacts", `{}`)
		want := "- report.csv (text/csv, 30 B): http://x/v3\n" +
			"- fit.png (image/png, 2.0 KiB): http://x/png\n" +
			"[2 older versions of these files not listed: each file is listed once, in its latest version]\n"
		if got != want {
			t.Errorf("reply\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("cut at entries", func(t *testing.T) {
		f := &fake{arts: artifactsOf(100, "out/part-%03d.csv")}
		got := reply(t, lister{f}, tools.Options{MaxReplyBytes: 4096}, "list_artifacts", `{}`)
		n := checkWholeURLs(t, got)
		if n == 0 || len(got) > 4096 {
			t.Fatalf("%d whole URLs in %d bytes, want some within 4096:\n%s", n, len(got), got)
		}
		if want := fmt.Sprintf("[%d more files not listed, to keep this reply short]\n", 100-n); !strings.HasSuffix(got, want) {
			t.Errorf("reply does not end with %q:\n%s", want, got)
		}
		if !strings.HasPrefix(got, "- out/part-000.csv ") {
			t.Errorf("the newest is not first:\n%s", got)
		}
	})
	t.Run("one execution's artifacts", func(t *testing.T) {
		f := &fake{result: &session.Result{Stdout: "saved\n", Artifacts: artifactsOf(100, "plots/%d.png")}}
		got := reply(t, f, tools.Options{MaxReplyBytes: 4096}, "code_sandbox", `{"code": "save()"}`)
		n := checkWholeURLs(t, got)
		if n == 0 || !strings.Contains(got, fmt.Sprintf("[%d more files not listed", 100-n)) {
			t.Errorf("%d whole URLs; reply:\n%s", n, got)
		}
		if strings.Contains(got, "bytes cut") {
			t.Errorf("the artifact list was cut in the middle:\n%s", got)
		}
	})
}

// selector is a fake that can say whether it selects datasets.
type selector struct {
	*fake
	can bool
}

func (s selector) CanSelectDatasets() bool { return s.can }

// TestSelectDatasetOffered: select_dataset is offered, and named in the
// other tools' descriptions, only where it can load something.
func TestSelectDatasetOffered(t *testing.T) {
	names := func(ts []tools.Tool) (string, string) {
		var n []string
		var desc strings.Builder
		for _, tl := range ts {
			n = append(n, tl.Name)
			desc.WriteString(tl.Description)
		}
		return strings.Join(n, ","), desc.String()
	}
	for _, tc := range []struct {
		name string
		m    tools.Manager
		want string
	}{
		{"manager that cannot select", selector{&fake{}, false}, "code_sandbox,list_datasets,export_dataset"},
		{"manager that can select", selector{&fake{}, true}, "code_sandbox,list_datasets,select_dataset,export_dataset"},
		{"manager that does not say", &fake{}, "code_sandbox,list_datasets,select_dataset,export_dataset"},
	} {
		got, desc := names(tools.New(tc.m, tools.Options{}))
		if got != tc.want {
			t.Errorf("%s: tools %s, want %s", tc.name, got, tc.want)
		}
		if offered := strings.Contains(got, "select_dataset"); strings.Contains(desc, "select_dataset") != offered {
			t.Errorf("%s: select_dataset offered %v, but the descriptions say:\n%s", tc.name, offered, desc)
		}
	}

	// A real Manager says what its configuration allows.
	fetch := datasets.FetcherFunc(nil)
	for _, tc := range []struct {
		access config.DatasetAccess
		opts   []session.Option
		want   bool
	}{
		{config.AccessNone, nil, false},
		{config.AccessLocalRO, nil, false},
		{config.AccessAPI, nil, false}, // no fetcher
		{config.AccessAPI, []session.Option{session.WithFetcher(fetch)}, true},
		{config.AccessHybrid, []session.Option{session.WithFetcher(fetch)}, true},
	} {
		cfg := config.Default()
		dir := t.TempDir()
		cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
		cfg.SessionsRoot = filepath.Join(dir, "sessions")
		cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
		cfg.DatasetAccess = tc.access
		cfg.DatasetsHostRO = dir
		m, err := session.NewManager(context.Background(), cfg, append(tc.opts, session.WithDriver(sessiontest.NewDriver()))...)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := names(tools.New(m, tools.Options{}))
		if offered := strings.Contains(got, "select_dataset"); offered != tc.want {
			t.Errorf("DATASET_ACCESS=%s with %d options: select_dataset offered %v, want %v", tc.access, len(tc.opts), offered, tc.want)
		}
		m.Close(context.Background())
	}
}

// TestExceptionReplyOnTheEngine: the real kernel's tracebacks end with the
// exception line; the reply has it once.
func TestExceptionReplyOnTheEngine(t *testing.T) {
	t.Parallel()
	tl := find(t, tools.New(engineManager(t), tools.Options{}), "code_sandbox")
	for _, tc := range []struct{ code, timeout, want string }{
		{"1/0", "", "ZeroDivisionError: division by zero"},
		{"import json\njson.loads('')", "", "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"},
		{"import time\ntime.sleep(60)", "1", "KeyboardInterrupt"},
	} {
		got := call(t, tl, "", codeInput(tc.code, tc.timeout))
		n := 0
		for _, line := range strings.Split(got, "\n") {
			if line == tc.want {
				n++
			}
		}
		if n != 1 || !strings.Contains(got, "\n  File \"") {
			t.Errorf("%s: the line %q %d times in the reply, want once after the frames:\n%s", tc.code, tc.want, n, got)
		}
	}
}
