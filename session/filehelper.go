package session

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
)

// fileOpsScript is the helper every files API call runs in the container,
// as the sandbox user, beside the kernel. It is passed on the command line
// rather than built into the image, so an image of any version that has
// python3 serves it.
//
//go:embed fileops.py
var fileOpsScript string

// maxHelperLine bounds one JSON line of the helper: a FileInfo with a path
// of the longest the kernel allows (4096 bytes), escaped.
const maxHelperLine = 64 << 10

// helperCall is one run of the helper in a session's container.
type helperCall struct {
	s      execStream
	r      *bufio.Reader
	stop   func() bool
	once   sync.Once
	closed chan struct{} // closed by Close
}

// startHelper runs the helper's op with req in e's container. The stream is
// closed when ctx ends, so a helper that hangs holds nobody.
func (m *Manager) startHelper(ctx context.Context, e *entry, op string, req any) (*helperCall, error) {
	es, ok := m.drv.(execStreamer)
	if !ok {
		return nil, fmt.Errorf("the driver cannot run a helper in a container: %w", errors.ErrUnsupported)
	}
	arg, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	s, err := es.ExecStream(ctx, e.containerID, m.cfg.User,
		[]string{"python3", "-I", "-S", "-B", "-c", fileOpsScript, op, string(arg)})
	if err != nil {
		return nil, err
	}
	h := &helperCall{s: s, r: bufio.NewReaderSize(s, 64<<10), closed: make(chan struct{})}
	h.stop = context.AfterFunc(ctx, h.close)
	return h, nil
}

func (h *helperCall) close() { h.once.Do(func() { h.s.Close(); close(h.closed) }) }

// Close ends the helper's stream.
func (h *helperCall) Close() error {
	h.stop()
	h.close()
	return nil
}

// next decodes the helper's next line into v.
func (h *helperCall) next(ctx context.Context, v any) error {
	line, err := h.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return fmt.Errorf("the file helper's answer is longer than %d bytes", maxHelperLine)
	}
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if msg := lastLine(h.s.Stderr()); msg != "" {
			return fmt.Errorf("the file helper failed: %s", msg)
		}
		return fmt.Errorf("the file helper ended without an answer: %w", io.ErrUnexpectedEOF)
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("the file helper's answer: %w", err)
	}
	return nil
}

// lastLine is the last non-empty line of s: a Python traceback's verdict.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// cleanPath returns p as an absolute, clean sandbox path: relative paths
// are taken from /session. A ".." element is refused rather than resolved,
// so that what the caller names is what is touched, and no path may carry
// a NUL byte (the kernel could not take it).
func cleanPath(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: empty", ErrBadPath)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: contains a NUL byte", ErrBadPath)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: a \"..\" element (name the folder itself)", ErrBadPath)
		}
	}
	if len(p) > maxPathBytes {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadPath, maxPathBytes)
	}
	if !strings.HasPrefix(p, "/") {
		p = "/session/" + p
	}
	return path.Clean(p), nil
}

// maxPathBytes is Linux's PATH_MAX, less its NUL.
const maxPathBytes = 4095

// quotePath quotes a sandbox path for a message: a name may hold newlines
// and escape sequences.
func quotePath(p string) string {
	if len(p) > 256 {
		cut := 256
		for cut > 0 && p[cut]&0xC0 == 0x80 {
			cut--
		}
		return fmt.Sprintf("%q…", p[:cut])
	}
	return fmt.Sprintf("%q", p)
}
