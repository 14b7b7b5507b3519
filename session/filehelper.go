package session

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// maxHelperLine bounds one JSON line of the helper: a FileInfo with a path
// of the longest the kernel allows (4096 bytes), escaped.
const maxHelperLine = 64 << 10

// readOnly are the helper's ops that change nothing in the sandbox.
var readOnly = map[string]bool{"stat": true, "read": true, "list": true, "glob": true}

// helperCall is one run of the helper in a session's container.
type helperCall struct {
	s      execStream
	r      *bufio.Reader
	stop   func() bool
	once   sync.Once
	closed chan struct{} // closed by Close
}

// startHelper runs the helper's op with req in e's container: the files
// tool on the container's channel, or, when its init runs no tools, the
// helper by the driver's exec. The stream is closed when ctx ends, so a
// helper that hangs holds nobody.
func (m *Manager) startHelper(ctx context.Context, e *entry, op string, req any) (*helperCall, error) {
	arg, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	// The call, as agentbox_tools.py reads it: a length, then JSON.
	call, err := json.Marshal([]string{op, string(arg)})
	if err != nil {
		return nil, err
	}
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(call)), uint32(len(call)))
	msg = append(msg, call...)
	var s execStream
	var t *toolStream
	if readOnly[op] && len(msg) <= 64<<10 {
		// A call that changes nothing goes with the start, a round
		// trip sooner: run late in a container thawed after the caller
		// gave up, it answers nobody and changes nothing.
		t, err = m.spawnToolWith(ctx, e.containerID, kernel.ToolFiles, msg)
	} else if t, err = m.spawnTool(ctx, e.containerID, kernel.ToolFiles); err == nil {
		// The rest only once the tool runs: a call sent to a frozen
		// container must never run once it is thawed.
		if _, err = t.Write(msg); err != nil {
			t.Close()
			return nil, fmt.Errorf("send the call to the file helper: %w", err)
		}
	}
	switch {
	case err == nil:
		s = t
	case errors.Is(err, errNoChannel):
		es, ok := m.drv.(execStreamer)
		if !ok {
			return nil, fmt.Errorf("the driver cannot run a helper in a container: %w", errors.ErrUnsupported)
		}
		if s, err = es.ExecStream(ctx, e.containerID, m.cfg.User,
			[]string{"python3", "-I", "-S", "-B", sandboximage.FileOpsPath, op, string(arg)}); err != nil {
			return nil, err
		}
	default:
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
