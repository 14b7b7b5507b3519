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
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// maxHelperLine bounds one JSON line of the helper: a FileInfo with a path
// of the longest the kernel allows (4096 bytes), escaped.
const maxHelperLine = 64 << 10

// readOnly are the helper's ops that change nothing in the sandbox.
var readOnly = map[string]bool{"stat": true, "read": true, "list": true, "glob": true}

// helperCall is one call of the helper in a session's container.
type helperCall struct {
	s      execStream
	r      *bufio.Reader
	stop   func() bool
	once   sync.Once
	closed chan struct{} // closed by close

	// A files tool of the channel (nil: an exec of the helper, one call
	// only), given back to ch by Close once its answer was whole.
	kept     *keptTool
	ch       *channel
	complete atomic.Bool
}

// startHelper runs the helper's op with req in e's container: on a files
// tool of the container's channel (an idle one, or one it starts), or,
// when its init runs no tools, by the driver's exec. body is the rest of
// what the call sends, when the host has it whole (a small write): it
// goes with the call. A write with no body streams its files after. The stream is closed when ctx ends, so a helper
// that hangs holds nobody.
func (m *Manager) startHelper(ctx context.Context, e *entry, op string, req any, body []byte) (*helperCall, error) {
	arg, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	h, err := m.toolCall(ctx, e.containerID, op, string(arg), body)
	if !errors.Is(err, errNoChannel) {
		return h, err
	}
	es, ok := m.drv.(execStreamer)
	if !ok {
		return nil, fmt.Errorf("the driver cannot run a helper in a container: %w", errors.ErrUnsupported)
	}
	s, err := es.ExecStream(ctx, e.containerID, m.cfg.User,
		[]string{"python3", "-I", "-S", "-B", sandboximage.FileOpsPath, op, string(arg)})
	if err != nil {
		return nil, err
	}
	h = &helperCall{s: s, r: bufio.NewReaderSize(s, 64<<10), closed: make(chan struct{})}
	h.stop = context.AfterFunc(ctx, h.close)
	if len(body) > 0 {
		if _, err := s.Write(body); err != nil {
			h.Close()
			return nil, fmt.Errorf("send the call to the file helper: %w", err)
		}
	}
	return h, nil
}

// toolCall sends the call to a files tool of container id's channel: an
// idle one, else one it starts. errNoChannel when the init runs no tools.
func (m *Manager) toolCall(ctx context.Context, id, op, arg string, body []byte) (*helperCall, error) {
	ch, err := m.channelOf(ctx, id)
	if err != nil {
		return nil, err
	}
	for {
		kt := ch.takeIdle()
		if kt == nil {
			break
		}
		h, err := m.callKept(ctx, id, ch, kt, op, arg, body)
		if !errors.Is(err, errToolGone) {
			return h, err
		}
		// It ended before it took the call (code of the sandbox user
		// may kill it): the call never ran, so another tool takes it.
	}
	// The call, as agentbox_fileops.serve reads it: a length, then JSON.
	// A new tool needs no confirmation: it runs.
	msg := toolMessage(op, arg, false)
	var t *toolStream
	if readOnly[op] && len(msg) <= 64<<10 {
		// A call that changes nothing goes with the start, a round
		// trip sooner: run late in a container thawed after the caller
		// gave up, it answers nobody and changes nothing.
		t, err = m.spawnToolWith(ctx, id, kernel.ToolFiles, msg)
	} else if t, err = m.spawnTool(ctx, id, kernel.ToolFiles); err == nil {
		// The rest only once the tool runs: a call sent to a frozen
		// container must never run once it is thawed.
		if _, err = t.Write(append(msg, body...)); err != nil {
			t.Close()
			return nil, fmt.Errorf("send the call to the file helper: %w", err)
		}
	}
	if err != nil {
		return nil, err
	}
	kt := &keptTool{t: t, r: bufio.NewReaderSize(t, 64<<10)}
	h := &helperCall{s: t, r: kt.r, closed: make(chan struct{}), kept: kt, ch: ch}
	h.stop = context.AfterFunc(ctx, h.close)
	return h, nil
}

// keptStall is how long an idle files tool may take to answer a call
// before it is taken for stopped: its answer is a few pipe hops away.
const keptStall = 2 * time.Second

// errToolGone means an idle files tool ended before it took a call.
var errToolGone = errors.New("the idle files tool is gone")

// callKept sends the call to kt, an idle files tool. A call that changes
// something must never run once it was given up on, as one sent to a
// frozen container is (this one was idle, so nobody knows it runs): it
// goes whole inside a window of the host's clock (callInWindow), and,
// when the tool reads it too late for that, waits for the tool's READY
// and confirms it. The container is looked at while the tool does not
// answer, as a tool's start is. errToolGone when the tool turns out to
// have ended before the call reached it.
func (m *Manager) callKept(ctx context.Context, id string, ch *channel, kt *keptTool, op, arg string, body []byte) (*helperCall, error) {
	// A write's files follow its call, unless they were sent with it: the
	// tool answers nothing before they come.
	whole := op != "write" || body != nil
	if !readOnly[op] && whole {
		h, err := m.callInWindow(ctx, id, ch, kt, op, arg, body)
		if !errors.Is(err, errStale) {
			return h, err
		}
	}
	h := &helperCall{s: kt.t, r: kt.r, closed: make(chan struct{}), kept: kt, ch: ch}
	h.stop = context.AfterFunc(ctx, h.close)
	confirm := !readOnly[op]
	w := m.watchIdle(ctx, id, h.close)
	stop := w.stop
	// An idle tool runs as the sandbox user, whose code may stop it
	// (SIGSTOP) as well as kill it: one that does not answer in
	// keptStall, in a container that runs, is let go for a new one (the
	// call has not run: a change waits for its 'g').
	var stalled atomic.Bool
	stall := time.AfterFunc(keptStall, func() {
		stalled.Store(true)
		h.close()
	})
	_, err := kt.t.Write(toolMessage(op, arg, confirm))
	if err == nil {
		if confirm {
			var line []byte
			if line, err = kt.r.ReadSlice('\n'); err == nil && string(line) != readyLine {
				err = fmt.Errorf("the file helper said %q, not that it is ready", line)
			}
			// The watches end before the 'g': once it is sent the call
			// may run, and is never taken for not run.
			stop()
			stall.Stop()
			if err == nil && !stalled.Load() && !h.isClosed() {
				_, err = kt.t.Write(append([]byte{'g'}, body...))
			} else if err == nil {
				err = errors.New("given up before the go")
			}
		} else {
			// The first byte of the answer: the tool runs.
			_, err = kt.r.Peek(1)
		}
	}
	stop()
	stall.Stop()
	if err == nil && !stalled.Load() {
		return h, nil
	}
	h.Close()
	if err := m.idleFailed(ctx, id, w); err != nil {
		return nil, err
	}
	switch {
	case stalled.Load():
		m.log.Warn("an idle files tool did not answer: a new one takes the call", "container", shortID(id), "after", keptStall)
		return nil, errToolGone
	case endedEarly(err):
		return nil, errToolGone
	}
	return nil, fmt.Errorf("the file helper: %w", err)
}

// callWindow is how long after the host sends a call whole a files tool
// may still start it (agentbox_fileops.serve checks it by its clock, which
// is the host's: containers share the host's kernel, and gVisor keeps its
// clock to the host's). It is under keptStall, so that a call the host
// has given up on as stalled can no longer start when it sends it again.
const callWindow = keptStall / 2

// errStale means a files tool read a call after its window and did not
// run it: it is idle again, and the call goes the long way.
var errStale = errors.New("the files tool read the call after its window")

// callInWindow sends a call that changes something to kt whole, body and
// all, with the window of the host's clock it may start in: one round
// trip, where a confirmation costs two. Until the first byte of the
// answer, a give-up (ctx, a frozen or lost container) takes effect at the
// window's end, not before: a call read inside the window runs and its
// answer comes, one read after it never runs, so a call given up on
// without an answer never runs later. errStale when the tool read it too
// late (nothing ran).
func (m *Manager) callInWindow(ctx context.Context, id string, ch *channel, kt *keptTool, op, arg string, body []byte) (*helperCall, error) {
	sent := time.Now()
	notAfter := sent.Add(callWindow)
	h := &helperCall{s: kt.t, r: kt.r, closed: make(chan struct{}), kept: kt, ch: ch}
	var late sync.Once
	giveUp := func() {
		late.Do(func() { time.AfterFunc(time.Until(notAfter), h.close) })
	}
	h.stop = context.AfterFunc(ctx, giveUp)
	w := m.watchIdle(ctx, id, giveUp)
	var stalled atomic.Bool
	stall := time.AfterFunc(keptStall, func() { // past the window: it cannot start now
		stalled.Store(true)
		h.close()
	})
	window := map[string]any{"sent": unixSeconds(sent), "not_after": unixSeconds(notAfter), "body": len(body)}
	_, err := kt.t.Write(append(toolMessage(op, arg, window), body...))
	stale := false
	if err == nil {
		var first []byte
		if first, err = kt.r.Peek(1); err == nil {
			stale = first[0] == staleLine[0]
		}
	}
	w.stop()
	stall.Stop()
	if err == nil && !stalled.Load() {
		// Answered: the call runs, and a give-up from here ends it at once
		// (one already due ends it now).
		h.stop()
		h.stop = context.AfterFunc(ctx, h.close)
		if !stale {
			return h, nil
		}
		if kt.readLine(staleLine) && kt.readLine(idleLine) {
			h.stop()
			return nil, errStale
		}
		err = errors.New("the files tool's refusal of a late call was cut short")
	}
	h.Close()
	if err := m.idleFailed(ctx, id, w); err != nil {
		return nil, err
	}
	switch {
	case stalled.Load():
		m.log.Warn("an idle files tool did not answer: a new one takes the call", "container", shortID(id), "after", keptStall)
		return nil, errToolGone
	case err == nil: // given up at the window's end without a cause: ctx
		return nil, context.Cause(ctx)
	case endedEarly(err):
		return nil, errToolGone
	}
	return nil, fmt.Errorf("the file helper: %w", err)
}

// readLine reads one line of the tool's and says whether it is want.
func (kt *keptTool) readLine(want string) bool {
	line, err := kt.r.ReadSlice('\n')
	return err == nil && string(line) == want
}

// unixSeconds is t as agentbox_fileops reads a clock: seconds since the
// epoch.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// readyLine is agentbox_fileops.READY; idleLine is its IDLE; staleLine its
// STALE, which no answer starts with.
const (
	readyLine = "{\"ready\": true}\n"
	idleLine  = "{\"idle\": true}\n"
	staleLine = "#stale\n"
)

// toolMessage is a call as a files tool reads it: a 4-byte big-endian
// length, then the JSON [op, request, confirm].
func toolMessage(op, arg string, confirm any) []byte {
	call, _ := json.Marshal([]any{op, arg, confirm})
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(call)), uint32(len(call)))
	return append(msg, call...)
}

func (h *helperCall) close() { h.once.Do(func() { h.s.Close(); close(h.closed) }) }

// isClosed says whether close was called.
func (h *helperCall) isClosed() bool {
	select {
	case <-h.closed:
		return true
	default:
		return false
	}
}

// whole says the call's answer was read to its end: Close may give the
// tool back for another call.
func (h *helperCall) whole() { h.complete.Store(true) }

// endInput ends what the host sends for the call: the end of a kept
// tool's input would end the tool, so it is told in words.
func (h *helperCall) endInput() error {
	if h.kept != nil {
		_, err := h.s.Write([]byte("{\"end\": true}\n"))
		return err
	}
	return h.s.CloseWrite()
}

// awaitEnd lets a write's answers run to their end (the "done" after the
// last file's), so that Close finds a kept tool's answer whole and keeps
// the tool; a helper that says nothing more within idleWait is let go.
func (h *helperCall) awaitEnd(answers <-chan writeAnswer) {
	if h.kept == nil {
		return
	}
	t := time.AfterFunc(idleWait, h.close)
	defer t.Stop()
	for range answers {
	}
}

// idleWait bounds how long Close waits for a tool's IDLE after a whole
// answer; the tool says it at once.
const idleWait = 2 * time.Second

// Close ends the call: a files tool whose answer was whole goes back to
// its channel once it says it is idle; any other helper's stream closes.
func (h *helperCall) Close() error {
	if h.kept == nil || !h.complete.Load() || !h.stop() {
		h.stop()
		h.close()
		return nil
	}
	t := time.AfterFunc(idleWait, h.close)
	line, err := h.r.ReadSlice('\n')
	if !t.Stop() || err != nil || string(line) != idleLine || !h.ch.keep(h.kept) {
		h.close()
	}
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
