package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// hostile is text a sandbox could put in any record: an OSC 52 clipboard
// write, a screen clear, 8-bit and UTF-8 CSI, DEL, a carriage return that
// would overwrite the line, bidi overrides and isolates, and a line
// separator.
const hostile = "evil\x1b]52;c;aGk=\x07\x1b[2J\x9b\u009b[31m\x7f\rhidden\u202efdp.exe\u2066x\u2069\u2028\u0085\x00end"

// unsafeAt returns the offset of the first thing in s a terminal could act
// on, or -1: a control byte other than newline and tab (a carriage return
// only right before a newline), DEL, invalid UTF-8 (a lone 0x9b is CSI to
// an 8-bit terminal), a C1 control, a bidi control or a line or paragraph
// separator.
func unsafeAt(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return i
		case r == '\n', r == '\t':
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
			return i
		case r == '\u061c', r == '\u200e', r == '\u200f', r >= '\u202a' && r <= '\u202e',
			r >= '\u2066' && r <= '\u2069', r == '\u2028', r == '\u2029':
			return i
		}
		i += n
	}
	return -1
}

// checkTerminalSafe fails t if out holds anything unsafeAt finds.
func checkTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if i := unsafeAt(out); i >= 0 {
		lo, hi := max(i-40, 0), min(i+40, len(out))
		t.Errorf("%s: terminal control at byte %d: %q", what, i, out[lo:hi])
	}
}

// fillHostile sets every exported string of v, through structs, pointers,
// slices (given one element), maps and interfaces, to hostile text.
func fillHostile(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(hostile)
		}
	case reflect.Pointer:
		if v.IsNil() && v.CanSet() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if !v.IsNil() {
			fillHostile(v.Elem())
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillHostile(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Len() == 0 && v.CanSet() {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		for i := range v.Len() {
			fillHostile(v.Index(i))
		}
	case reflect.Map:
		if v.CanSet() {
			m := reflect.MakeMap(v.Type())
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fillHostile(k)
			fillHostile(e)
			m.SetMapIndex(k, e)
			v.Set(m)
		}
	case reflect.Interface:
		if v.CanSet() {
			v.Set(reflect.ValueOf(hostile))
		}
	}
}

// TestTextViewEscapesSandboxText renders a view whose every string is
// hostile, and checks that the text never hands the terminal a control
// sequence while still showing the text, escaped.
func TestTextViewEscapesSandboxText(t *testing.T) {
	var v view
	fillHostile(reflect.ValueOf(&v).Elem())
	v.Source = "folder" // the artifact URL note depends on it
	var row listRow
	fillHostile(reflect.ValueOf(&row).Elem())

	var sb strings.Builder
	p := &printer{w: &sb}
	p.view(&v, options{follow: true})
	p.followed(v.Executions[0], options{})
	p.list([]listRow{row}, options{})
	out := sb.String()
	checkTerminalSafe(t, "text view", out)
	for _, want := range []string{`\x1b]52;c;aGk=`, `\u202e`, `hidden`, `fdp.exe`} {
		if !strings.Contains(out, want) {
			t.Errorf("the view does not show %q:\n%s", want, out)
		}
	}

	// --json is for programs: the strings decode to exactly what was
	// recorded, while the encoding escapes what JSON itself leaves raw
	// (DEL, C1, bidi controls).
	sb.Reset()
	p.view(&v, options{json: true})
	checkTerminalSafe(t, "--json view", sb.String())
	var back view
	if err := json.Unmarshal([]byte(sb.String()), &back); err != nil {
		t.Fatalf("--json: %v\n%s", err, sb.String())
	}
	if want := strings.ToValidUTF8(hostile, "\uFFFD"); back.Session.Key != want || back.Executions[0].Stdout != want {
		t.Errorf("--json changed the recorded text: key %q, stdout %q, want %q", back.Session.Key, back.Executions[0].Stdout, want)
	}
}

// TestDirEscapesSandboxText reads a session folder whose records are full
// of escape sequences, as a sandbox could write them, in text and --follow.
func TestDirEscapesSandboxText(t *testing.T) {
	dir := bindFolder(t)
	t0 := time.Date(2025, 3, 4, 11, 0, 0, 0, time.UTC)
	writeJSONFile(t, filepath.Join(dir, session.MetadataFile), session.Metadata{
		Key: hostile, ID: hostile, Container: hostile, Image: hostile, Created: t0, LastUsed: t0,
		Limits: map[string]string{hostile: hostile},
	})
	entry := session.LogEntry{Time: t0, ID: hostile, ExecutionCount: 5, Code: hostile + "\n" + hostile,
		Stdout: hostile, Stderr: hostile, Error: &kernel.Exception{Name: hostile, Value: hostile, Traceback: []string{hostile}},
		Artifacts: []session.Artifact{{ID: hostile, Name: hostile, MIME: hostile, URL: hostile, SHA256: hostile}}}
	appendLog(t, dir, entry)
	writeJSONFile(t, filepath.Join(dir, session.StateFile), kernel.State{
		Variables: []kernel.Variable{{Name: hostile, Type: hostile, Repr: hostile, Shape: []any{hostile}}},
		Modules:   []kernel.Module{{Name: hostile, Module: hostile}},
	})
	writeJSONFile(t, filepath.Join(dir, session.DatasetsFile), []datasets.Record{
		{DatasetID: hostile, Name: hostile, Status: datasets.Status(hostile), Reason: hostile, Updated: t0},
	})
	r := viewer(t, "--dir", dir)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkTerminalSafe(t, "stdout", r.stdout)
	checkTerminalSafe(t, "stderr", r.stderr)

	// --follow prints what is appended later the same way.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- run(ctx, []string{"--follow", "--dir", dir}, nil, &stdout, &stderr) }()
	time.Sleep(700 * time.Millisecond)
	entry.ID = "followed-" + hostile
	appendLog(t, dir, entry)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stdout.String(), "followed-") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	if !strings.Contains(stdout.String(), "followed-") {
		t.Fatalf("--follow did not print the new execution:\n%s", stdout.String())
	}
	checkTerminalSafe(t, "--follow stdout", stdout.String())
	checkTerminalSafe(t, "--follow stderr", stderr.String())
}

// TestErrorsEscapeSandboxText checks the messages on stderr: a folder
// name, like anything in an error, may hold what a sandbox wrote.
func TestErrorsEscapeSandboxText(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x\x1b]52;c;aGk=\x07")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := viewer(t, "--dir", dir) // no session_metadata.json
	if r.code == exitOK {
		t.Fatalf("a folder without metadata read without an error:\n%s", r.stdout)
	}
	checkTerminalSafe(t, "stderr, no metadata", r.stderr)
	if err := os.WriteFile(filepath.Join(dir, session.MetadataFile), []byte("{\x1b[2J"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = viewer(t, "--dir", dir)
	if r.code == exitOK {
		t.Fatalf("bad metadata read without an error:\n%s", r.stdout)
	}
	checkTerminalSafe(t, "stderr, bad metadata", r.stderr)
}

// TestOneLineEscapes checks the helper every error message on stderr goes
// through: one line, nothing a terminal acts on.
func TestOneLineEscapes(t *testing.T) {
	got := oneLine(errors.New("first\nsecond: " + hostile))
	checkTerminalSafe(t, "oneLine", got)
	if strings.Contains(got, "\n") || !strings.HasPrefix(got, "first; second: evil") {
		t.Errorf("oneLine = %q", got)
	}
}
