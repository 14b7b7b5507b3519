package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// The tools the init of protocol 3 runs for the host (Client.Spawn).
const (
	// ToolFiles runs calls of the files API one after another, as the
	// sandbox user (sandbox-image/agentbox_fileops.py's serve).
	ToolFiles = "files"
	// ToolCommand is one shell command under its supervisor.
	ToolCommand = "command"
	// ToolSpare is a command's supervisor started ahead of its command,
	// which it takes, once confirmed, from the host.
	ToolSpare = "spare"
)

// ToolWindow is the credit of a tool's stream in each direction: the bytes
// one side may send that the other has not yet taken. It must equal WINDOW
// in sandbox-image/agentbox_tools.py.
const ToolWindow = 4 << 20

// toolChunk is the largest payload of one tool frame (CHUNK there).
const toolChunk = 256 << 10

// maxToolStderr bounds what a tool's standard error keeps for messages.
const maxToolStderr = 64 << 10

// ErrNoTools means the init does not run tools (an image that predates
// them, or a kernel that does not announce them): callers take another way.
var ErrNoTools = errors.New("the kernel runs no tools")

// HasTool reports whether the init announced the tool name.
func (h Hello) HasTool(name string) bool { return slices.Contains(h.Tools, name) }

// Tool is a helper process the init forked in the container for this
// client (Client.Spawn): a byte stream to its standard input (Write,
// CloseWrite) and from its standard output (Read), multiplexed with
// everything else on the client's stream, with flow control of its own,
// so that a slow reader of one tool holds no other call. It is safe for
// one reader and one writer at a time.
type Tool struct {
	c   *Client
	tag string

	spawned chan error // the init's first answer
	pid     int

	mu       sync.Mutex
	cond     *sync.Cond
	out      [][]byte // received, not read
	eof      bool     // the tool's output ended
	err      error    // the stream failed, or Close was called
	stderr   []byte
	inflight int // input bytes sent, not acknowledged
	taken    int // output bytes read, not yet acknowledged
	closed   bool
}

// Spawn asks the init to start a tool (ToolFiles, ToolCommand) and waits
// until it runs. Nothing is sent to the tool before it answers, so a tool
// whose start the caller gave up on (ctx ended: a frozen container, say)
// reads the end of its input and does nothing. ErrNoTools when the init
// does not announce the tool.
func (c *Client) Spawn(ctx context.Context, name string) (*Tool, error) {
	return c.SpawnWith(ctx, name, nil)
}

// SpawnWith is Spawn sending first (at most a window) to the tool's
// standard input with the request to start it, a round trip sooner: only
// for input that may reach the tool even after the caller gave up on it
// (a call that changes nothing), since a frozen container takes both once
// thawed.
func (c *Client) SpawnWith(ctx context.Context, name string, first []byte) (*Tool, error) {
	if len(first) > toolChunk {
		return nil, fmt.Errorf("%w: %d bytes to send with a tool's start, at most %d", ErrRejected, len(first), toolChunk)
	}
	if !c.hello.HasTool(name) {
		return nil, fmt.Errorf("%w: tool %q", ErrNoTools, name)
	}
	t := &Tool{c: c, spawned: make(chan error, 1)}
	t.cond = sync.NewCond(&t.mu)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.nextID++
	t.tag = "t" + fmt.Sprint(c.nextID)
	c.tools[t.tag] = t
	c.mu.Unlock()
	frames, err := encodeRequest(request{Type: "spawn", Req: t.tag, Tool: name})
	if err == nil && len(first) > 0 {
		var in []byte
		if in, err = encodeRequest(request{Type: "in", Req: t.tag, N: len(first)}); err == nil {
			frames = append(append(frames, in...), first...)
			t.inflight = len(first)
		}
	}
	if err == nil {
		err = c.write(frames)
	}
	if err != nil {
		t.forget()
		return nil, err
	}
	select {
	case err := <-t.spawned:
		if err != nil {
			t.forget()
			return nil, fmt.Errorf("start the %s tool: %w", name, err)
		}
		return t, nil
	case <-ctx.Done():
		t.Close()
		return nil, fmt.Errorf("start the %s tool: %w", name, context.Cause(ctx))
	}
}

// PID is the tool's process id in the container.
func (t *Tool) PID() int { return t.pid }

// Read reads the tool's standard output; io.EOF once it ended.
func (t *Tool) Read(p []byte) (int, error) {
	t.mu.Lock()
	for len(t.out) == 0 && !t.eof && t.err == nil {
		t.cond.Wait()
	}
	if len(t.out) == 0 {
		err := t.err
		if err == nil {
			err = io.EOF
		}
		t.mu.Unlock()
		return 0, err
	}
	n := 0
	for n < len(p) && len(t.out) > 0 {
		k := copy(p[n:], t.out[0])
		n += k
		if k == len(t.out[0]) {
			t.out[0] = nil
			t.out = t.out[1:]
		} else {
			t.out[0] = t.out[0][k:]
		}
	}
	t.taken += n
	var ack int
	// Acknowledged by the quarter window: the init waits for room only
	// with a whole window unacknowledged, and once the reader has taken
	// a quarter of it the ack goes, so a drained reader never leaves the
	// tool waiting (and a small call's answer costs no ack).
	if t.taken >= ToolWindow/4 {
		ack, t.taken = t.taken, 0
	}
	t.mu.Unlock()
	if ack > 0 {
		_ = t.c.send(request{Type: "ack", Req: t.tag, N: ack})
	}
	return n, nil
}

// Write writes p to the tool's standard input, waiting for room in its
// window.
func (t *Tool) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		t.mu.Lock()
		for t.inflight >= ToolWindow && t.err == nil && !t.closed && !t.eof {
			t.cond.Wait()
		}
		if err := t.writeErr(); err != nil {
			t.mu.Unlock()
			return written, err
		}
		n := min(len(p), toolChunk, ToolWindow-t.inflight)
		t.inflight += n
		t.mu.Unlock()
		if err := t.c.sendData(request{Type: "in", Req: t.tag, N: n}, p[:n]); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

func (t *Tool) writeErr() error {
	if t.err != nil {
		return t.err
	}
	if t.closed {
		return ErrClosed
	}
	if t.eof {
		return fmt.Errorf("the tool's output ended: %w", io.ErrClosedPipe)
	}
	return nil
}

// CloseWrite ends the tool's standard input.
func (t *Tool) CloseWrite() error {
	t.mu.Lock()
	err := t.writeErr()
	t.mu.Unlock()
	if err != nil {
		return err
	}
	return t.c.send(request{Type: "eof", Req: t.tag})
}

// Close lets the tool go: the init closes its ends of the tool's pipes
// (its input ends, its output breaks), and reads and writes in flight
// return ErrClosed.
func (t *Tool) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	if t.err == nil {
		t.err = ErrClosed
	}
	t.cond.Broadcast()
	t.mu.Unlock()
	t.forget()
	_ = t.c.send(request{Type: "close", Req: t.tag})
	return nil
}

// Stderr is what the tool wrote to its standard error so far (the first
// 64 KiB).
func (t *Tool) Stderr() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.stderr)
}

func (t *Tool) forget() {
	t.c.mu.Lock()
	if t.c.tools[t.tag] == t {
		delete(t.c.tools, t.tag)
	}
	t.c.mu.Unlock()
}

// fail ends the tool with err (the client's stream ended).
func (t *Tool) fail(err error) {
	select {
	case t.spawned <- err:
	default:
	}
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.cond.Broadcast()
	t.mu.Unlock()
}

// dispatchTool handles a frame of tool t; payload is what followed it.
func (c *Client) dispatchTool(t *Tool, f frame, payload []byte) {
	switch f.Type {
	case "spawned":
		t.pid = f.Pid
		select {
		case t.spawned <- nil:
		default:
		}
	case "out":
		t.mu.Lock()
		if !t.closed {
			t.out = append(t.out, payload)
			t.cond.Broadcast()
		}
		t.mu.Unlock()
	case "err":
		t.mu.Lock()
		if room := maxToolStderr - len(t.stderr); room > 0 {
			t.stderr = append(t.stderr, payload[:min(room, len(payload))]...)
		}
		t.mu.Unlock()
	case "ack":
		t.mu.Lock()
		t.inflight = max(0, t.inflight-f.N)
		t.cond.Broadcast()
		t.mu.Unlock()
	case "end":
		t.mu.Lock()
		t.eof = true
		t.cond.Broadcast()
		t.mu.Unlock()
		t.forget()
	case "error":
		err := remoteError(f.Code, f.Msg)
		select {
		case t.spawned <- err:
		default:
			t.fail(err)
		}
	}
}
