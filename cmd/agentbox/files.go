package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	iofs "io/fs"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/session"
)

// runFiles is `agentbox files [--session KEY] [--json] [-r] [PATH]`: list a
// folder of a session (default /session), as the sandbox user sees it.
func runFiles(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("files")
	key := fs.String("session", "default", "")
	asJSON := fs.Bool("json", false, "")
	recursive := fs.Bool("r", false, "")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	dir := "/session"
	switch fs.NArg() {
	case 0:
	case 1:
		dir = fs.Arg(0)
	default:
		fmt.Fprintf(stderr, "agentbox: files: want one PATH, got %d (see agentbox help)\n", fs.NArg())
		return exitUsage
	}
	m, status := openManager(ctx, stderr)
	if m == nil {
		return status
	}
	defer closeManager(ctx, m, stderr)
	list, err := m.ListFiles(ctx, *key, dir, session.ListOptions{Recursive: *recursive})
	if err != nil {
		return fileFailure(ctx, stderr, "files", err)
	}
	if *asJSON {
		out := make([]fileJSON, 0, len(list.Entries))
		for _, e := range list.Entries {
			out = append(out, fileJSON{Path: e.Path, Type: string(e.Type), Size: e.Size,
				Mode: octalMode(e.Mode), ModTime: e.ModTime, Target: e.Target})
		}
		b, err := json.Marshal(struct {
			Path      string     `json:"path"`
			Entries   []fileJSON `json:"entries"`
			Truncated bool       `json:"truncated"`
		}{list.Path, out, list.Truncated})
		if err != nil {
			fmt.Fprintf(stderr, "agentbox: files: encode: %s\n", oneLine(err))
			return exitSandbox
		}
		fmt.Fprintf(stdout, "%s\n", termsafe.JSON(b))
		return exitOK
	}
	writeFileTable(stdout, list)
	return exitOK
}

// fileJSON is one entry of `agentbox files --json`: the mode in octal, as
// people write it.
type fileJSON struct {
	Path    string    `json:"path"`
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"`
	ModTime time.Time `json:"mtime"`
	Target  string    `json:"target,omitempty"`
}

// octalMode is m's permission and special bits as chmod takes them.
func octalMode(m iofs.FileMode) string {
	u := uint32(m.Perm())
	if m&iofs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&iofs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&iofs.ModeSticky != 0 {
		u |= 0o1000
	}
	return fmt.Sprintf("%04o", u)
}

// writeFileTable prints a listing like ls -l: mode, size, time, path (a
// link with its target). Names are the sandbox's: escaped, one line each.
func writeFileTable(w io.Writer, list *session.FileList) {
	width := 1
	for _, e := range list.Entries {
		width = max(width, len(strconv.FormatInt(e.Size, 10)))
	}
	for _, e := range list.Entries {
		name := termsafe.Line(e.Path)
		if e.Type == session.TypeSymlink {
			name += " -> " + termsafe.Line(e.Target)
		}
		fmt.Fprintf(w, "%s  %*d  %s  %s\n", e.FileMode(), width, e.Size, e.ModTime.Local().Format("2006-01-02 15:04"), name)
	}
	if list.Truncated {
		fmt.Fprintf(w, "(more entries not shown: the listing stops at %d)\n", len(list.Entries))
	}
}
