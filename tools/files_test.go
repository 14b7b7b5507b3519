package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/tools"
)

// files is a fake that can also move files: it keeps what was written and
// answers listings and reads with canned values.
type files struct {
	*fake
	written map[string]string
	list    *session.FileList
}

func (f files) WriteFile(_ context.Context, key, path string, data io.Reader, mode fs.FileMode) (int64, error) {
	f.record("write " + key + " " + path)
	if f.err != nil {
		return 0, f.err
	}
	b, _ := io.ReadAll(data)
	f.written[path] = string(b)
	return int64(len(b)), nil
}

func (f files) ReadFile(_ context.Context, key, path string, offset, length int64) (*session.FileReader, error) {
	f.record(fmt.Sprintf("read %s %s %d %d", key, path, offset, length))
	if f.err == nil {
		return nil, errors.New("the fake reads nothing")
	}
	return nil, f.err
}

func (f files) ListFiles(_ context.Context, key, dir string, opts session.ListOptions) (*session.FileList, error) {
	f.record("list " + key + " " + dir)
	return f.list, f.err
}

func fileTool(t *testing.T, f files, name string, opts tools.Options) tools.Tool {
	t.Helper()
	opts.SessionKey = key
	return find(t, tools.New(f, opts), name)
}

func newFiles(err error) files {
	return files{fake: &fake{err: err}, written: map[string]string{}}
}

func callTool(t *testing.T, tl tools.Tool, input string) (string, error) {
	t.Helper()
	return tl.Call(context.Background(), json.RawMessage(input))
}

// TestFileToolsOffered: the file tools come with a FileManager only.
func TestFileToolsOffered(t *testing.T) {
	var names []string
	for _, tl := range tools.New(newFiles(nil), tools.Options{}) {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, " "); !strings.HasSuffix(got, "write_file read_file list_files") {
		t.Errorf("tools with a FileManager: %s", got)
	}
	for _, tl := range tools.New(&fake{}, tools.Options{}) {
		if strings.HasSuffix(tl.Name, "_file") || tl.Name == "list_files" {
			t.Errorf("%s offered without a FileManager", tl.Name)
		}
	}
	for _, tl := range tools.New(newFiles(nil), tools.Options{}) {
		var schema map[string]any
		if err := json.Unmarshal(tl.Schema, &schema); err != nil {
			t.Errorf("%s: schema is not JSON: %v", tl.Name, err)
		}
	}
}

func TestWriteFileTool(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		err         error
		want        string
		wrote       string // content written at /session/a.txt; "" = nothing written
	}{
		{"text", `{"path": "/session/a.txt", "content": "héllo\n"}`, nil, "Wrote 7 B to /session/a.txt.", "héllo\n"},
		{"relative", `{"path": "a.txt", "content": "x"}`, nil, "Wrote 1 B to /session/a.txt.", ""},
		{"base64", `{"path": "/session/a.txt", "content": "AAEC", "encoding": "base64"}`, nil, "Wrote 3 B", "\x00\x01\x02"},
		{"bad base64", `{"path": "/session/a.txt", "content": "!!", "encoding": "base64"}`, nil, `"content" is not valid base64`, ""},
		{"bad encoding", `{"path": "/session/a.txt", "content": "x", "encoding": "latin\n1"}`, nil, `"encoding" must be "utf-8" or "base64", not "latin\n1"`, ""},
		{"no content", `{"path": "/session/a.txt"}`, nil, `"content" is required`, ""},
		{"no path", `{"content": "x"}`, nil, `"path" is required`, ""},
		{"not json", `write a.txt`, nil, "Invalid input: the input is not valid JSON", ""},
		{"unknown field", `{"path": "a", "content": "", "mode": 7}`, nil, `unknown field "mode"`, ""},
		{"permission", `{"path": "/etc/x", "content": "x"}`,
			&session.FileError{Op: "write", Key: "k", Path: "/etc/x", Err: session.ErrPermission},
			"Could not write /etc/x: permission denied (the sandbox may write only under /session, /app, /workspace and /tmp).", ""},
		{"full", `{"path": "/session/big", "content": "x"}`,
			&session.FileError{Op: "write", Key: "k", Path: "/session/big", Err: session.ErrNoSpace},
			"the sandbox's disk is full", ""},
		{"too large", `{"path": "/session/big", "content": "x"}`,
			&session.FileError{Op: "write", Key: "k", Path: "/session/big", Err: fmt.Errorf("%w: over the cap of 1 MiB (FILES_MAX_FILE_MB)", session.ErrFileTooLarge)},
			"Could not write /session/big: file too large: over the cap of 1 MiB (FILES_MAX_FILE_MB).", ""},
		{"bad path", `{"path": "/session/../etc/x", "content": "x"}`,
			&session.FileError{Op: "write", Key: "k", Path: "/session/../etc/x", Err: fmt.Errorf("%w: a \"..\" element", session.ErrBadPath)},
			`invalid path: a ".." element`, ""},
		{"odd name", `{"path": "/session/a\nb", "content": "x"}`, nil, `Wrote 1 B to "/session/a\nb".`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFiles(tc.err)
			got, err := callTool(t, fileTool(t, f, "write_file", tools.Options{}), tc.input)
			if err != nil || !strings.Contains(got, tc.want) {
				t.Errorf("reply %q, %v; want %q", got, err, tc.want)
			}
			if tc.wrote != "" && f.written["/session/a.txt"] != tc.wrote {
				t.Errorf("wrote %q, want %q", f.written["/session/a.txt"], tc.wrote)
			}
		})
	}
	// A system failure is the call's error, not a reply.
	f := newFiles(&session.Error{Op: "write files", Key: "k", Err: session.ErrUnavailable})
	if _, err := callTool(t, fileTool(t, f, "write_file", tools.Options{}), `{"path": "a", "content": ""}`); !errors.Is(err, session.ErrUnavailable) {
		t.Errorf("system failure: %v", err)
	}
}

func TestReadFileToolInput(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		err         error
		want        string
	}{
		{"no path", `{}`, nil, `"path" is required`},
		{"negative offset", `{"path": "a", "offset": -1}`, nil, `"offset" must be 0 or more`},
		{"negative length", `{"path": "a", "length": -5}`, nil, `"length" must be 1 or more`},
		{"length a string", `{"path": "a", "length": "10"}`, nil, `field "length" must be a number, not string`},
		{"missing", `{"path": "/session/x"}`, &session.FileError{Op: "read", Path: "/session/x", Err: session.ErrFileNotFound}, "Could not read /session/x: there is no such file or folder."},
		{"folder", `{"path": "/session"}`, &session.FileError{Op: "read", Path: "/session", Err: session.ErrIsDir}, "it is a folder (list it with list_files)"},
		{"pipe", `{"path": "/session/p"}`, &session.FileError{Op: "read", Path: "/session/p", Err: session.ErrNotRegular}, "not a regular file"},
		{"no session", `{"path": "/session/p"}`, &session.Error{Op: "read", Err: session.ErrNotFound}, "The sandbox has no files yet"},
		{"forbidden", `{"path": "/etc/shadow"}`, &session.FileError{Op: "read", Path: "/etc/shadow", Err: session.ErrPermission},
			"Could not read /etc/shadow: permission denied (the sandbox user may not read it)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := callTool(t, fileTool(t, newFiles(tc.err), "read_file", tools.Options{}), tc.input)
			if err != nil || !strings.Contains(got, tc.want) {
				t.Errorf("reply %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestListFilesTool(t *testing.T) {
	now := time.Now()
	list := &session.FileList{Path: "/session", Entries: []session.FileInfo{
		{Path: "/session/data", Type: session.TypeDir, ModTime: now},
		{Path: "/session/data/a.csv", Type: session.TypeFile, Size: 2048},
		{Path: "/session/l", Type: session.TypeSymlink, Target: "/etc/passwd"},
		{Path: "/session/p", Type: session.TypeFIFO},
		{Path: "/session/evil\nname", Type: session.TypeFile, Size: 1},
	}}
	f := newFiles(nil)
	f.list = list
	got, err := callTool(t, fileTool(t, f, "list_files", tools.Options{}), `{"recursive": true}`)
	want := "/session:\n/session/data/\n/session/data/a.csv  2.0 KiB\n/session/l -> /etc/passwd  (link)\n/session/p  (fifo)\n\"/session/evil\\nname\"  1 B"
	if err != nil || got != want {
		t.Errorf("reply:\n%s\nwant:\n%s", got, want)
	}
	if f.calls[0] != "list thread-1 /session" {
		t.Errorf("call %v", f.calls)
	}
	// Whole lines only, and what was left out is said.
	var many session.FileList
	many.Path = "/session"
	for i := 0; i < 1000; i++ {
		many.Entries = append(many.Entries, session.FileInfo{Path: fmt.Sprintf("/session/f%04d.txt", i), Type: session.TypeFile, Size: 10})
	}
	many.Truncated = true
	f.list = &many
	got, _ = callTool(t, fileTool(t, f, "list_files", tools.Options{MaxReplyBytes: 1000}), `{}`)
	if len(got) > 1000 || !strings.HasSuffix(got, "[... more not shown: list a subfolder, or use code_sandbox to search]") {
		t.Errorf("long listing (%d bytes):\n%s", len(got), got)
	}
	for _, l := range strings.Split(got, "\n")[1:] {
		if !strings.HasSuffix(l, "10 B") && !strings.HasPrefix(l, "[...") {
			t.Errorf("a line cut: %q", l)
		}
	}
	f.list = &session.FileList{Path: "/tmp"}
	if got, _ := callTool(t, fileTool(t, f, "list_files", tools.Options{}), `{"path": "/tmp"}`); got != "/tmp is empty." {
		t.Errorf("empty: %q", got)
	}
	f = newFiles(&session.FileError{Op: "list", Path: "/session/a.csv", Err: session.ErrNotDir})
	if got, _ := callTool(t, fileTool(t, f, "list_files", tools.Options{}), `{"path": "/session/a.csv"}`); !strings.Contains(got, "it is a file, not a folder (read it with read_file)") {
		t.Errorf("a file: %q", got)
	}
}

// TestFileToolsOnTheEngine: the tools against a real sandbox, reading a
// long file in parts, a binary file described, and the sandbox's answers
// to what may not be done.
func TestFileToolsOnTheEngine(t *testing.T) {
	t.Parallel()
	m := engineManager(t)
	list := tools.New(m, tools.Options{MaxReplyBytes: 1024, SessionKey: key})
	write, read, ls := find(t, list, "write_file"), find(t, list, "read_file"), find(t, list, "list_files")
	reply := func(tl tools.Tool, input string) string {
		t.Helper()
		got, err := callTool(t, tl, input)
		if err != nil {
			t.Fatalf("%s %s: %v", tl.Name, input, err)
		}
		return got
	}
	if got := reply(read, `{"path": "/session/x"}`); !strings.Contains(got, "The sandbox has no files yet") {
		t.Errorf("read before anything ran: %q", got)
	}
	long := "x" + strings.Repeat("0123456789abcdé", 110) // 1761 bytes, an é across the 1024 boundary
	in, _ := json.Marshal(map[string]string{"path": "notes/long.txt", "content": long})
	if got := reply(write, string(in)); got != "Wrote 1.7 KiB to /session/notes/long.txt." {
		t.Errorf("write: %q", got)
	}
	got := reply(read, `{"path": "/session/notes/long.txt"}`)
	first, _, _ := strings.Cut(got, "\n[...")
	first = first[strings.Index(first, ":\n")+2:]
	if !strings.HasPrefix(got, "/session/notes/long.txt, bytes 0 to 1023 of 1761:") || !strings.HasSuffix(got, "call read_file with offset 1023 to read on]") || !strings.HasPrefix(long, first) {
		t.Errorf("first part:\n%s", got)
	}
	got = reply(read, `{"path": "/session/notes/long.txt", "offset": 1023}`)
	if !strings.HasPrefix(got, "/session/notes/long.txt, bytes 1023 to 1761 of 1761 (the end):\n") || first+got[strings.Index(got, ":\n")+2:] != long {
		t.Errorf("second part:\n%s", got)
	}
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	reply(write, `{"path": "/session/dot.png", "content": "`+png+`", "encoding": "base64"}`)
	if got := reply(read, `{"path": "/session/dot.png"}`); got != "/session/dot.png is binary (image/png, 70 B); it is not shown. Process it with code_sandbox." {
		t.Errorf("binary: %q", got)
	}
	if got := reply(write, `{"path": "/usr/x", "content": "x"}`); !strings.Contains(got, "Could not write /usr/x: permission denied") {
		t.Errorf("write outside: %q", got)
	}
	if got := reply(read, `{"path": "/session/../etc/passwd"}`); !strings.Contains(got, `invalid path: a ".." element`) {
		t.Errorf("read with ..: %q", got)
	}
	if got := reply(ls, `{"recursive": true}`); !strings.Contains(got, "/session/notes/long.txt  1.7 KiB") || !strings.Contains(got, "/session/dot.png  70 B") {
		t.Errorf("list: %q", got)
	}
}
