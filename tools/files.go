package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/agentbox/agentbox/session"
)

// FileManager is the optional capability of a Manager to move files in and
// out of a session and list its folders (as *session.Manager does). New
// adds write_file, read_file and list_files when the Manager has it.
type FileManager interface {
	WriteFile(ctx context.Context, key, path string, data io.Reader, mode fs.FileMode) (int64, error)
	ReadFile(ctx context.Context, key, path string, offset, length int64) (*session.FileReader, error)
	ListFiles(ctx context.Context, key, dir string, opts session.ListOptions) (*session.FileList, error)
}

const (
	writeExample = `{"path": "/session/notes.txt", "content": "first line\n"}`
	readExample  = `{"path": "/session/data/results.csv"}`
	listExample  = `{"path": "/session", "recursive": false}`

	// listToolLimit is the most entries list_files asks for; the reply
	// shows what fits in MaxReplyBytes.
	listToolLimit = 2000
)

func (t *toolset) fileTools(f FileManager) []Tool {
	return []Tool{t.writeFile(f), t.readFile(f), t.listFiles(f)}
}

func (t *toolset) writeFile(f FileManager) Tool {
	return Tool{
		Name: "write_file",
		Description: "Write a file in the sandbox, replacing it if it exists (missing folders are made). " +
			"Paths are under /session (kept for the whole conversation; code reads them there) or /tmp. " +
			"Text goes in content; for binary data set encoding to base64.",
		Schema: []byte(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"absolute path under /session or /tmp, or a path relative to /session"},` +
			`"content":{"type":"string","description":"the whole content of the file"},` +
			`"encoding":{"type":"string","enum":["utf-8","base64"],"description":"how content is written; default utf-8"}},` +
			`"required":["path","content"],"additionalProperties":false}`),
		Call: func(ctx context.Context, input json.RawMessage) (string, error) {
			var in struct {
				Path     string  `json:"path"`
				Content  *string `json:"content"`
				Encoding string  `json:"encoding"`
			}
			if msg := decode(input, &in, writeExample); msg != "" {
				return msg, nil
			}
			if in.Path == "" {
				return invalid(`"path" is required and must not be empty`, writeExample), nil
			}
			if in.Content == nil {
				return invalid(`"content" is required (use "" for an empty file)`, writeExample), nil
			}
			data := []byte(*in.Content)
			switch strings.ToLower(in.Encoding) {
			case "", "utf-8", "utf8", "text":
			case "base64":
				var err error
				if data, err = base64.StdEncoding.DecodeString(strings.TrimSpace(*in.Content)); err != nil {
					return invalid(`"content" is not valid base64 (standard alphabet, with padding)`, writeExample), nil
				}
			default:
				return invalid(fmt.Sprintf(`"encoding" must be "utf-8" or "base64", not %s`, name(cut(in.Encoding, 40))), writeExample), nil
			}
			key, err := t.key(ctx)
			if err != nil {
				return "", err
			}
			n, err := f.WriteFile(ctx, key, in.Path, strings.NewReader(string(data)), 0)
			if err != nil {
				return t.fileReply("write", in.Path, err)
			}
			return fmt.Sprintf("Wrote %s to %s.", size(n), name(cut(cleanForReply(in.Path), 300))), nil
		},
	}
}

func (t *toolset) readFile(f FileManager) Tool {
	return Tool{
		Name: "read_file",
		Description: "Read a text file from the sandbox (under /session, /tmp, or anywhere the sandbox may read). " +
			"Long files come back in parts: the reply says the offset to ask for next. " +
			"Binary files are described, not shown: process them with " + t.opts.CodeToolName + ".",
		Schema: []byte(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"absolute path, or a path relative to /session"},` +
			`"offset":{"type":"integer","minimum":0,"description":"byte to start at; default 0"},` +
			`"length":{"type":"integer","minimum":1,"description":"most bytes to return; default and maximum: what a reply holds"}},` +
			`"required":["path"],"additionalProperties":false}`),
		Call: func(ctx context.Context, input json.RawMessage) (string, error) {
			var in struct {
				Path   string `json:"path"`
				Offset int64  `json:"offset"`
				Length int64  `json:"length"`
			}
			if msg := decode(input, &in, readExample); msg != "" {
				return msg, nil
			}
			switch {
			case in.Path == "":
				return invalid(`"path" is required and must not be empty`, readExample), nil
			case in.Offset < 0:
				return invalid(`"offset" must be 0 or more`, readExample), nil
			case in.Length < 0:
				return invalid(`"length" must be 1 or more`, readExample), nil
			}
			max := int64(t.opts.MaxReplyBytes)
			if in.Length == 0 || in.Length > max {
				in.Length = max
			}
			key, err := t.key(ctx)
			if err != nil {
				return "", err
			}
			r, err := f.ReadFile(ctx, key, in.Path, in.Offset, in.Length)
			if err != nil {
				return t.fileReply("read", in.Path, err)
			}
			defer r.Close()
			data, err := io.ReadAll(r)
			if err != nil {
				return t.fileReply("read", in.Path, err)
			}
			return readReply(r.Info, r.Offset, data, t.opts.CodeToolName), nil
		},
	}
}

// readReply shows a part of a file to the model: text as it is, with where
// it sits in the file; anything else described.
func readReply(info session.FileInfo, offset int64, data []byte, codeTool string) string {
	p := name(cut(info.Path, 300))
	if kind, ok := binaryKind(data, offset); ok {
		return fmt.Sprintf("%s is binary (%s, %s); it is not shown. Process it with %s.", p, kind, size(info.Size), codeTool)
	}
	end := offset + int64(len(data))
	// A multi-byte character cut at the end is left for the next part.
	if end < info.Size {
		keep := len(data)
		for i := 1; i <= 3 && i <= len(data); i++ {
			if utf8.RuneStart(data[len(data)-i]) {
				if !utf8.FullRune(data[len(data)-i:]) {
					keep = len(data) - i
				}
				break
			}
		}
		data, end = data[:keep], offset+int64(keep)
	}
	switch {
	case info.Size == 0:
		return fmt.Sprintf("%s is empty.", p)
	case offset == 0 && end == info.Size:
		return fmt.Sprintf("%s (%s):\n%s", p, size(info.Size), data)
	case end == info.Size:
		return fmt.Sprintf("%s, bytes %d to %d of %d (the end):\n%s", p, offset, end, info.Size, data)
	}
	return fmt.Sprintf("%s, bytes %d to %d of %d:\n%s\n[... %s more: call read_file with offset %d to read on]", p, offset, end, info.Size, data, size(info.Size-end), end)
}

// binaryKind says what data is when it is not text to show: a NUL byte, or
// bytes that are not UTF-8 (a part may start inside a character: its
// first bytes are forgiven).
func binaryKind(data []byte, offset int64) (string, bool) {
	if len(data) == 0 {
		return "", false
	}
	text := data
	if offset > 0 {
		for i := 0; i < 3 && len(text) > 0 && !utf8.RuneStart(text[0]); i++ {
			text = text[1:]
		}
	}
	valid := utf8.Valid(text)
	if !valid {
		// Cut inside a character at the end is still text.
		for i := 1; i <= 3 && i < len(text); i++ {
			if utf8.Valid(text[:len(text)-i]) && !utf8.FullRune(text[len(text)-i:]) {
				valid = true
				break
			}
		}
	}
	if valid && !strings.ContainsRune(string(text), 0) {
		return "", false
	}
	kind := http.DetectContentType(data)
	if i := strings.IndexByte(kind, ';'); i >= 0 {
		kind = kind[:i]
	}
	if strings.HasPrefix(kind, "text/") {
		kind = "not UTF-8 text"
	}
	return kind, true
}

func (t *toolset) listFiles(f FileManager) Tool {
	return Tool{
		Name: "list_files",
		Description: "List a folder of the sandbox (default /session): each entry's path, size and type, " +
			"optionally with everything below it.",
		Schema: []byte(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"folder to list; default /session"},` +
			`"recursive":{"type":"boolean","description":"also list what subfolders hold; default false"}},` +
			`"additionalProperties":false}`),
		Call: func(ctx context.Context, input json.RawMessage) (string, error) {
			var in struct {
				Path      string `json:"path"`
				Recursive bool   `json:"recursive"`
			}
			if msg := decode(input, &in, listExample); msg != "" {
				return msg, nil
			}
			if in.Path == "" {
				in.Path = "/session"
			}
			key, err := t.key(ctx)
			if err != nil {
				return "", err
			}
			list, err := f.ListFiles(ctx, key, in.Path, session.ListOptions{Recursive: in.Recursive, Limit: listToolLimit})
			if err != nil {
				return t.fileReply("list", in.Path, err)
			}
			return listReply(list, t.opts.MaxReplyBytes, t.opts.CodeToolName), nil
		},
	}
}

// listReply lists entries one line each, whole lines only, as many as fit
// in about max bytes, and says what it left out.
func listReply(list *session.FileList, max int, codeTool string) string {
	if len(list.Entries) == 0 {
		return fmt.Sprintf("%s is empty.", name(cut(list.Path, 300)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", name(cut(list.Path, 300)))
	shown := 0
	for _, e := range list.Entries {
		var line string
		switch e.Type {
		case session.TypeDir:
			line = fmt.Sprintf("%s/\n", name(e.Path))
		case session.TypeFile:
			line = fmt.Sprintf("%s  %s\n", name(e.Path), size(e.Size))
		case session.TypeSymlink:
			line = fmt.Sprintf("%s -> %s  (link)\n", name(e.Path), name(cut(e.Target, 300)))
		default:
			line = fmt.Sprintf("%s  (%s)\n", name(e.Path), e.Type)
		}
		if b.Len()+len(line) > max-footerRoom {
			break
		}
		b.WriteString(line)
		shown++
	}
	if left := len(list.Entries) - shown; left > 0 || list.Truncated {
		more := fmt.Sprintf("%d more", left)
		if list.Truncated {
			more = "more"
		}
		fmt.Fprintf(&b, "[... %s not shown: list a subfolder, or use %s to search]\n", more, codeTool)
	}
	return strings.TrimRight(b.String(), "\n")
}

// fileReply explains a files API error to the model, or returns it as a Go
// error when the system failed.
func (t *toolset) fileReply(op, path string, err error) (string, error) {
	p := name(cut(cleanForReply(path), 300))
	var why string
	switch {
	case systemFailure(err):
		return "", fmt.Errorf("%s file: %w", op, err)
	case errors.Is(err, session.ErrNotFound):
		return "The sandbox has no files yet: nothing has run in this conversation. Write a file or run code first.", nil
	case errors.Is(err, session.ErrFileNotFound):
		why = "there is no such file or folder"
	case errors.Is(err, session.ErrIsDir):
		why = "it is a folder (list it with list_files)"
	case errors.Is(err, session.ErrNotDir) && op == "list":
		why = "it is a file, not a folder (read it with read_file)"
	case errors.Is(err, session.ErrNotDir):
		why = "a file is in the way where a folder should be"
	case errors.Is(err, session.ErrNotRegular):
		why = "it is not a regular file (a named pipe, socket or device)"
	case errors.Is(err, session.ErrPermission) && op == "write":
		why = "permission denied (the sandbox may write only under /session, /app, /workspace and /tmp)"
	case errors.Is(err, session.ErrPermission):
		why = "permission denied (the sandbox user may not read it)"
	case errors.Is(err, session.ErrNoSpace):
		why = "the sandbox's disk is full: remove files that are no longer needed"
	case errors.Is(err, session.ErrFileTooLarge), errors.Is(err, session.ErrBadPath), errors.Is(err, session.ErrPaused):
		var fe *session.FileError
		if errors.As(err, &fe) {
			err = fe.Err
		}
		why = err.Error()
	default:
		return "", fmt.Errorf("%s file: %w", op, err)
	}
	return cut(fmt.Sprintf("Could not %s %s: %s.", op, p, why), t.opts.MaxReplyBytes), nil
}

// cleanForReply is a path as the sandbox takes it: relative ones under
// /session.
func cleanForReply(p string) string {
	if !strings.HasPrefix(p, "/") {
		return "/session/" + p
	}
	return p
}
