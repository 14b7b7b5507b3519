package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// ErrUnknownCommand means no background command of the session has the id
// (it never ran here, or its Manager was another one, or closed).
var ErrUnknownCommand = errors.New("no such background command")

// maxFinished is how many finished background commands a Manager keeps
// per session for Status and Logs; the oldest go first.
const maxFinished = 64

// CommandStatus says how a background command is doing.
type CommandStatus struct {
	ID      string
	Session string
	Line    string
	Running bool
	Started time.Time
	// Result is how it ended, once it has (Running false); nil when it
	// could not run, and Err says why.
	Result *CommandResult
	Err    error
}

// LogChunk is output of one stream, in the order the command wrote it
// (as the supervisor read it: stdout and stderr interleave by chunk).
type LogChunk struct {
	Stream string // "stdout" or "stderr"
	Data   string
}

// CommandLogs is what a background command wrote from a cursor on.
type CommandLogs struct {
	Chunks []LogChunk
	// Next is the cursor to ask from next time: every byte written so far.
	Next int64
	// Skipped counts bytes after the cursor that were no longer kept: the
	// log keeps the first and the last MAX_OUTPUT_BYTES/2 of the combined
	// output.
	Skipped int64
	Running bool
}

// background is one command started by StartCommand.
type background struct {
	id, key, line string
	started       time.Time
	kill          context.CancelFunc
	done          chan struct{} // closed when it ended

	mu     sync.Mutex
	log    logRing
	result *CommandResult
	err    error
}

// commandSet holds a Manager's background commands; the zero value is
// ready.
type commandSet struct {
	mu   sync.Mutex
	byID map[string]*background
	ids  map[string][]string // session key -> ids, oldest first
}

func (s *commandSet) add(b *background) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID, s.ids = map[string]*background{}, map[string][]string{}
	}
	s.byID[b.id] = b
	ids := append(s.ids[b.key], b.id)
	// Forget the oldest finished ones past maxFinished.
	for len(ids) > maxFinished {
		old := s.byID[ids[0]]
		select {
		case <-old.done:
			delete(s.byID, ids[0])
			ids = ids[1:]
			continue
		default:
		}
		break
	}
	s.ids[b.key] = ids
}

func (s *commandSet) get(key, id string) *background {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.byID[id]; b != nil && b.key == key {
		return b
	}
	return nil
}

// StartCommand starts cmd in the session of key (created if needed) and
// returns its id at once; the command runs until it exits, its Timeout
// (here 0 means none) or KillCommand, and its output is kept for
// CommandLogs (the first and last MAX_OUTPUT_BYTES/2 of it). It runs
// beside the kernel, as Run does, and is recorded in the history when it
// ends. Background commands belong to this Manager: Close kills those
// still running.
func (m *Manager) StartCommand(ctx context.Context, key string, cmd Command) (_ string, err error) {
	ctx, span := m.startSpan(ctx, SpanStartCommand, key)
	defer func() { endSpan(span, err) }()
	if err := m.begin(); err != nil {
		return "", err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return "", err
	}
	if err := cmd.check(); err != nil {
		return "", &Error{Op: "start command", Key: key, Err: err}
	}
	if _, ok := m.drv.(commandStreamer); !ok {
		return "", &Error{Op: "start command", Key: key, Err: fmt.Errorf("the driver cannot run commands in a container: %w", errors.ErrUnsupported)}
	}
	// A background command is in flight until it ends.
	admitted, err := m.admitted(ctx, key, cmd.Admission)
	if err != nil {
		return "", &Error{Op: "start command", Key: key, Err: err}
	}
	e, containerID, count, done, err := m.commandSession(ctx, key)
	if err != nil {
		admitted()
		return "", err
	}
	bctx, kill := context.WithCancel(m.bg)
	limit := m.cfg.MaxOutputBytes
	b := &background{
		id: newCommandID(), key: key, line: cmd.Line, started: time.Now(), kill: kill, done: make(chan struct{}),
		log: logRing{head: limit - limit/2, tail: limit / 2},
	}
	m.cmds.add(b)
	span.SetAttributes(semconv.GenAIToolCallID(b.id))
	// The command's own span, a child of this call's, ends with it.
	_, cspan := m.startSpan(trace.ContextWithSpanContext(bctx, span.SpanContext()), SpanCommand, key, toolAttrs(b.id)...)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer admitted()
		defer done()
		defer kill()
		defer close(b.done)
		defer func() {
			b.mu.Lock()
			res, err := b.result, b.err
			b.mu.Unlock()
			m.endCommand(cspan, cmd.Line, res, err)
			m.metrics.commandDone("background", res, err)
		}()
		out := &headTail{head: limit - limit/2, tail: limit / 2, name: "stdout"}
		errs := &headTail{head: limit - limit/2, tail: limit / 2, name: "stderr"}
		_, err := m.supervise(bctx, containerID, cmd, cmd.Timeout, 0, func(kind byte, p []byte) {
			stream := "stdout"
			if kind == 'o' {
				out.write(p)
			} else {
				errs.write(p)
				stream = "stderr"
			}
			b.mu.Lock()
			b.log.write(stream, p)
			b.mu.Unlock()
		}, func(o *outcome) {
			// With the command's own span: its trace is the caller's.
			m.finishCommand(trace.ContextWithSpan(context.WithoutCancel(m.bg), cspan), b, e, count, cmd, o, out, errs)
		})
		if err != nil {
			b.mu.Lock()
			b.err = &Error{Op: "background command " + b.id, Key: key, ContainerID: containerID, Err: m.whyLost(bctx, e.id, containerID, err)}
			b.mu.Unlock()
		}
	}()
	return b.id, nil
}

// finishCommand records background command b's outcome and keeps it for
// CommandStatus.
func (m *Manager) finishCommand(ctx context.Context, b *background, e *entry, count int, cmd Command, o *outcome, out, errs *headTail) {
	res := &CommandResult{Session: b.key, ID: b.id, Line: cmd.Line, Started: b.started}
	res.fill(o, out.String(), errs.String())
	// Everything streamed (no cap in the container): the cuts are
	// this side's.
	res.Truncated = nil
	for _, h := range []*headTail{out, errs} {
		if h.cut > 0 {
			if res.Truncated == nil {
				res.Truncated = map[string]int64{}
			}
			res.Truncated[h.name] = h.cut
		}
	}
	m.recordCommand(ctx, e, count, res)
	b.mu.Lock()
	b.result = res
	b.mu.Unlock()
}

// lookupCommand returns the key's background command id.
func (m *Manager) lookupCommand(op, key, id string) (*background, error) {
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return nil, err
	}
	b := m.cmds.get(key, id)
	if b == nil {
		return nil, &Error{Op: op, Key: key, Err: fmt.Errorf("%w: %q", ErrUnknownCommand, id)}
	}
	return b, nil
}

// CommandStatus returns the state of background command id of key.
func (m *Manager) CommandStatus(ctx context.Context, key, id string) (*CommandStatus, error) {
	b, err := m.lookupCommand("command status", key, id)
	if err != nil {
		return nil, err
	}
	st := &CommandStatus{ID: b.id, Session: b.key, Line: b.line, Started: b.started}
	select {
	case <-b.done:
	default:
		st.Running = true
		return st, nil
	}
	b.mu.Lock()
	st.Result, st.Err = b.result, b.err
	b.mu.Unlock()
	return st, nil
}

// WaitCommand waits until background command id of key ends (or ctx
// does) and returns its status.
func (m *Manager) WaitCommand(ctx context.Context, key, id string) (*CommandStatus, error) {
	b, err := m.lookupCommand("wait for command", key, id)
	if err != nil {
		return nil, err
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, &Error{Op: "wait for command", Key: key, Err: ctx.Err()}
	}
	return m.CommandStatus(ctx, key, id)
}

// CommandLogs returns what background command id of key wrote after
// cursor (0: from the start); pass the returned Next to read on.
func (m *Manager) CommandLogs(ctx context.Context, key, id string, cursor int64) (*CommandLogs, error) {
	b, err := m.lookupCommand("command logs", key, id)
	if err != nil {
		return nil, err
	}
	if cursor < 0 {
		return nil, &Error{Op: "command logs", Key: key, Err: fmt.Errorf("%w: cursor %d: want 0 or more", ErrInvalidCommand, cursor)}
	}
	running := true
	select {
	case <-b.done:
		running = false
	default:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	logs := b.log.from(cursor)
	logs.Running = running
	return logs, nil
}

// KillCommand kills background command id of key and every process it
// started (SIGTERM, then SIGKILL after INTERRUPT_GRACE_S) and waits until
// they are gone (or ctx ends). Killing a finished command does nothing.
func (m *Manager) KillCommand(ctx context.Context, key, id string) error {
	b, err := m.lookupCommand("kill command", key, id)
	if err != nil {
		return err
	}
	b.kill()
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return &Error{Op: "kill command", Key: key, Err: ctx.Err()}
	}
}

// headTail keeps the first head and last tail bytes written, and counts
// what it cut between.
type headTail struct {
	name       string
	head, tail int
	h, t       []byte
	total, cut int64
}

func (c *headTail) write(p []byte) {
	c.total += int64(len(p))
	if room := c.head - len(c.h); room > 0 {
		n := min(room, len(p))
		c.h = append(c.h, p[:n]...)
		p = p[n:]
	}
	c.t = append(c.t, p...)
	if over := len(c.t) - c.tail; over > 0 {
		c.cut += int64(over)
		c.t = append(c.t[:0], c.t[over:]...)
	}
}

func (c *headTail) String() string {
	s := string(c.h)
	if c.cut > 0 {
		s += fmt.Sprintf("\n[agentbox: %d bytes of %s cut here; the cap is %d bytes]\n", c.cut, c.name, c.head+c.tail)
	}
	return strings.ToValidUTF8(s+string(c.t), "\uFFFD")
}

// logRing is a command's combined output with byte offsets: the first
// head bytes, then a window of the last tail bytes.
type logRing struct {
	head, tail int
	chunks     []logChunk // head chunks, then tail chunks
	headBytes  int
	tailBytes  int
	total      int64
}

type logChunk struct {
	stream string
	off    int64
	data   []byte
}

func (r *logRing) write(stream string, p []byte) {
	if len(p) == 0 {
		return
	}
	r.chunks = append(r.chunks, logChunk{stream, r.total, append([]byte(nil), p...)})
	r.total += int64(len(p))
	if r.headBytes < r.head {
		r.headBytes += len(p)
		return
	}
	r.tailBytes += len(p)
	// Drop whole tail chunks while the rest still fills the window.
	first := 0
	for first < len(r.chunks) && r.chunks[first].off < int64(r.headBytes) {
		first++
	}
	for first < len(r.chunks)-1 && r.tailBytes-len(r.chunks[first].data) >= r.tail {
		r.tailBytes -= len(r.chunks[first].data)
		r.chunks = append(r.chunks[:first], r.chunks[first+1:]...)
	}
}

func (r *logRing) from(cursor int64) *CommandLogs {
	out := &CommandLogs{Next: max(cursor, r.total), Chunks: []LogChunk{}}
	at := cursor
	for _, c := range r.chunks {
		end := c.off + int64(len(c.data))
		if end <= at {
			continue
		}
		if c.off > at {
			out.Skipped += c.off - at
			at = c.off
		}
		out.Chunks = append(out.Chunks, LogChunk{c.stream, strings.ToValidUTF8(string(c.data[at-c.off:]), "\uFFFD")})
		at = end
	}
	if at < r.total {
		out.Skipped += r.total - at
	}
	return out
}
