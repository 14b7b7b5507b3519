package session

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/kernel"
)

// superviseMargin is what the supervisor may take, beyond the command's
// timeout and grace, to report; past it the host stops waiting.
const superviseMargin = 10 * time.Second

// commandCheckInterval is how often a running command's container is
// looked at (see supervise).
const commandCheckInterval = 3 * time.Second

// maxFrameExtra bounds a frame beyond the output cap: the supervisor reads
// 64 KiB at a time and adds a one-line note to a cut tail.
const maxFrameExtra = 64<<10 + 4096

// Run runs cmd in the session of key, creating the session if needed, and
// returns how it ended. It runs beside the kernel, not in it: an execution
// on the same key neither waits for it nor sees it, and the Python state
// is untouched. At the timeout (or when ctx ends) every process the
// command started, even one that left its process group or ignores
// SIGTERM, gets SIGTERM, then SIGKILL after INTERRUPT_GRACE_S; the result
// is flagged TimedOut (or Interrupted) and returned without an error.
// Whatever the command leaves running when it exits is killed too: start a
// long-lived process with StartCommand. The command is recorded in the
// history (and in BIND mode session.log).
//
// A Go error means the command could not run: ErrInvalidCommand for bad
// input, a *CommandError (for a missing working folder, wrapping
// fs.ErrNotExist), ErrSessionLost when the container went away meanwhile,
// each inside an *Error naming the session.
func (m *Manager) Run(ctx context.Context, key string, cmd Command) (res *CommandResult, err error) {
	ctx, span := m.startSpan(ctx, SpanRun, key, toolAttrs("")...)
	defer func() { m.endCommand(span, cmd.Line, res, err); m.metrics.commandDone("run", res, err) }()
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := cmd.check(); err != nil {
		return nil, &Error{Op: "run", Key: key, Err: err}
	}
	admitted, err := m.admitted(ctx, key, cmd.Admission)
	if err != nil {
		return nil, &Error{Op: "run", Key: key, Err: err}
	}
	defer admitted()
	e, containerID, count, done, err := m.commandSession(ctx, key)
	if err != nil {
		return nil, err
	}
	defer done()
	res = &CommandResult{Session: key, ID: newCommandID(), Line: cmd.Line, Started: time.Now()}
	limit := m.cfg.MaxOutputBytes
	out := &capBuffer{max: limit + maxFrameExtra, w: cmd.Stdout}
	errb := &capBuffer{max: limit + maxFrameExtra, w: cmd.Stderr}
	timeout := cmp.Or(cmd.Timeout, m.cfg.ExecTimeout)
	_, err = m.supervise(ctx, containerID, cmd, timeout, limit, func(kind byte, p []byte) {
		if kind == 'o' {
			out.Write(p)
		} else {
			errb.Write(p)
		}
	}, func(o *outcome) {
		res.fill(o, out.String(), errb.String())
		m.recordCommand(ctx, e, count, res)
	})
	if err != nil {
		return nil, &Error{Op: "run", Key: key, ContainerID: containerID, Err: m.whyLost(ctx, e.id, containerID, err)}
	}
	return res, nil
}

// fill sets what the supervisor reported.
func (r *CommandResult) fill(o *outcome, stdout, stderr string) {
	r.ExitCode, r.Signal = *o.ExitCode, o.Signal
	r.Stdout, r.Stderr = stdout, stderr
	r.Duration = time.Duration(o.Duration * float64(time.Second))
	r.TimedOut = o.Reason == "timeout"
	r.Interrupted = o.Reason == "interrupted"
	if len(o.Truncated) > 0 {
		r.Truncated = o.Truncated
	}
}

// commandSession returns the key's session (started if needed), its
// container and execution count, holding its turn only that long: a command runs beside the
// kernel, so executions keep their turns. Until done is called the
// session counts as in use and the sweep leaves it alone.
func (m *Manager) commandSession(ctx context.Context, key string) (*entry, string, int, func(), error) {
	for ended := 0; ; ended++ {
		e, release, err := m.acquire(ctx, key, true)
		if err != nil {
			return nil, "", 0, nil, err
		}
		id, count := e.containerID, e.execCount
		m.mu.Lock()
		e.commands++
		m.mu.Unlock()
		// Before the supervisor starts: until it runs, another process's
		// sweep can tell the session is in use only from its row.
		if err := m.markUsed(ctx, e); err != nil {
			m.mu.Lock()
			e.commands--
			m.mu.Unlock()
			m.endedElsewhere(ctx, e)
			release()
			if ended < maxEndedElsewhere {
				continue // evicted as this call began: a fresh one
			}
			return nil, "", 0, nil, &Error{Op: "run", Key: key, ContainerID: id, Err: fmt.Errorf("%w: %w", ErrSessionLost, err)}
		}
		release()
		var once sync.Once
		return e, id, count, func() {
			once.Do(func() {
				m.mu.Lock()
				e.commands--
				e.lastUsed = time.Now()
				m.mu.Unlock()
			})
		}, nil
	}
}

// supervise runs cmd under the supervisor in container id, passing each
// output frame to emit, and returns the supervisor's outcome, given first
// to done (if not nil) while the supervisor still waits (see
// agentbox_supervisor.py: a sweep that counts supervisors then sees the session
// busy until done has recorded the command): a command
// that could not start is a *CommandError. timeout 0 is none. maxOut caps
// each stream in the container (0: everything streams). When ctx ends the supervisor is told
// to kill the command, and its outcome (flagged interrupted) is still
// awaited, for the grace period and a margin.
func (m *Manager) supervise(ctx context.Context, id string, cmd Command, timeout time.Duration, maxOut int, emit func(kind byte, p []byte), done func(*outcome)) (*outcome, error) {
	grace := m.cfg.InterruptGrace
	sp := supervisorSpec{
		Line: cmd.Line, Cwd: cmp.Or(cmd.Cwd, DefaultCwd), Env: cmd.Env,
		Timeout: timeout.Seconds(), Grace: grace.Seconds(), MaxOutput: maxOut,
	}
	spec, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	s, err := m.sparedSupervisor(ctx, id, sp)
	if err == nil && s == nil {
		s, err = m.startSupervisor(ctx, id)
		if err == nil {
			if _, err = s.Write(frameSpec(spec)); err != nil {
				s.Close()
				return nil, fmt.Errorf("start the command: send it: %w", err)
			}
		}
	}
	if err != nil {
		if lost := m.checkAlive(context.WithoutCancel(ctx), id); lost != nil {
			return nil, lost
		}
		return nil, fmt.Errorf("start the command: %w", err)
	}
	// The next command's supervisor is started once this one is over:
	// a fork in the container beside a starting command slows both.
	defer m.refillSpare(context.WithoutCancel(ctx), id)
	var closeOnce sync.Once
	var closedByHost atomic.Bool
	closeStream := func() { closeOnce.Do(func() { closedByHost.Store(true); s.Close() }) }
	defer closeOnce.Do(func() { s.Close() })
	// A backstop only: the supervisor enforces the timeout itself.
	hard := time.AfterFunc(timeout+grace+superviseMargin, closeStream)
	if timeout == 0 {
		hard.Stop()
	}
	defer hard.Stop()
	stop := context.AfterFunc(ctx, func() {
		s.Write([]byte{'k'})
		s.CloseWrite()
		hard.Reset(grace + superviseMargin)
	})
	defer stop()

	// Under gVisor a container removed or killed mid-command can leave
	// the exec stream open without end: look at the container now and
	// then, and close the stream on a dead one (streamBroke then says
	// what happened to it).
	watched := make(chan struct{})
	defer close(watched)
	go func() {
		tick := time.NewTicker(commandCheckInterval)
		defer tick.Stop()
		for {
			select {
			case <-watched:
				return
			case <-tick.C:
				if m.checkAlive(context.WithoutCancel(ctx), id) != nil {
					closeStream()
					return
				}
			}
		}
	}()

	maxFrame := maxOut + maxFrameExtra
	if maxOut == 0 {
		maxFrame = maxFrameExtra
	}
	var fh [5]byte
	buf := make([]byte, 64<<10)
	for {
		if _, err := io.ReadFull(s, fh[:]); err != nil {
			return nil, m.streamBroke(ctx, id, s, closedByHost.Load(), err)
		}
		n := int(binary.BigEndian.Uint32(fh[1:]))
		if n > maxFrame {
			return nil, m.badStream(ctx, id, s, fh[:], fmt.Errorf("the command's supervisor sent a frame of %d bytes (at most %d)", n, maxFrame))
		}
		if n > len(buf) {
			buf = make([]byte, n)
		}
		p := buf[:n]
		if _, err := io.ReadFull(s, p); err != nil {
			return nil, m.streamBroke(ctx, id, s, closedByHost.Load(), err)
		}
		switch fh[0] {
		case 'o', 'e':
			emit(fh[0], p)
		case 'x':
			var o outcome
			if err := json.Unmarshal(p, &o); err != nil {
				return nil, fmt.Errorf("the command's supervisor: bad outcome: %w", err)
			}
			if o.Error != nil {
				return nil, o.startError()
			}
			if o.ExitCode == nil {
				return nil, errors.New("the command's supervisor: outcome without an exit code")
			}
			if done != nil {
				done(&o)
			}
			return &o, nil
		default:
			return nil, m.badStream(ctx, id, s, fh[:], fmt.Errorf("the command's supervisor sent a frame of unknown kind %q", fh[0]))
		}
	}
}

// streamBroke explains a supervisor stream that ended before the outcome.
func (m *Manager) streamBroke(ctx context.Context, id string, s CommandStream, closedByHost bool, err error) error {
	if lost := m.lostSoon(ctx, id); lost != nil {
		return lost
	}
	if closedByHost {
		return fmt.Errorf("the command's supervisor did not report in time; the stream was closed: %w", context.DeadlineExceeded)
	}
	if msg := strings.TrimSpace(s.Stderr()); msg != "" {
		return fmt.Errorf("the command's supervisor failed: %s", lastLines(msg, 5))
	}
	return fmt.Errorf("the command's stream ended early: %w", err)
}

// lostSoon returns a *lostError if container id is found gone or stopped
// within two seconds: a container being killed or removed ends a stream a
// moment before the engine reports it gone, so it looks a few times.
func (m *Manager) lostSoon(ctx context.Context, id string) error {
	ctx = context.WithoutCancel(ctx)
	for i := 0; i < 20; i++ {
		if lost := m.checkAlive(ctx, id); lost != nil {
			return lost
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// badStream explains a supervisor stream that carries something other
// than frames, given its first bytes head and what was wrong (err). Most
// often the container went between the exec's creation and its start,
// and the engine wrote its own words on the stream: the container's state
// is the answer then, else those words.
func (m *Manager) badStream(ctx context.Context, id string, s CommandStream, head []byte, err error) error {
	if lost := m.lostSoon(ctx, id); lost != nil {
		return lost
	}
	// Text is shown as text; the rest of its line, if it comes at once.
	if !utf8.Valid(head) || strings.ContainsFunc(string(head), func(r rune) bool { return r < ' ' && r != '\n' && r != '\r' }) {
		return err
	}
	rest := make([]byte, 200)
	done := make(chan int, 1)
	go func() { n, _ := io.ReadAtLeast(s, rest, 1); done <- n }()
	select {
	case n := <-done:
		head = append(head, rest[:n]...)
	case <-time.After(100 * time.Millisecond):
		s.Close() // ends the read
	}
	first, _, _ := strings.Cut(strings.TrimSpace(strings.ToValidUTF8(string(head), "?")), "\n")
	return fmt.Errorf("%w; it began with %q", err, strings.TrimSpace(first))
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// capBuffer keeps what a stream sent, up to max bytes (the supervisor caps
// already; this bounds the host's memory whatever it is sent), and passes
// every write on to w.
type capBuffer struct {
	buf bytes.Buffer
	max int
	w   io.Writer
}

func (c *capBuffer) Write(p []byte) {
	if c.w != nil {
		c.w.Write(p)
	}
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
}

// String is the text kept, invalid UTF-8 replaced (as executions do).
func (c *capBuffer) String() string { return strings.ToValidUTF8(c.buf.String(), "\uFFFD") }

// frameSpec is a supervisor's spec as it reads it: a 4-byte big-endian
// length, then the JSON.
func frameSpec(spec []byte) []byte {
	return append(binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(spec)), uint32(len(spec))), spec...)
}

// sparedSupervisor hands the command to the spare supervisor of container
// id's channel, if it has one, and starts the next spare: a command then
// does not wait for the init's fork. The spare says it runs (an "r"
// frame) before it is told to go, so that a command sent to a frozen
// container (a spare is idle, so nobody knows) never runs once thawed:
// the container is looked at while it does not answer, as at a tool's
// start. nil and no error when there is no spare, or it turned out gone
// before it took the command (the caller starts a supervisor).
func (m *Manager) sparedSupervisor(ctx context.Context, id string, sp supervisorSpec) (CommandStream, error) {
	ch, err := m.channelOf(ctx, id)
	if err != nil {
		return nil, nil // startSupervisor says why, or takes the exec
	}
	t := ch.takeSpare(ctx)
	if t == nil {
		return nil, nil
	}
	sp.Confirm = true
	spec, err := json.Marshal(sp)
	if err != nil {
		t.Close()
		return nil, err
	}
	w := m.watchIdle(ctx, id, func() { t.Close() })
	stopCtx := context.AfterFunc(ctx, func() { t.Close() })
	var fh [5]byte
	_, err = t.Write(frameSpec(spec))
	if err == nil {
		_, err = io.ReadFull(t, fh[:])
	}
	if err == nil && (fh[0] != 'r' || binary.BigEndian.Uint32(fh[1:]) != 0) {
		err = fmt.Errorf("the spare supervisor sent a frame of kind %q, not that it is ready", fh[0])
	}
	// The watches end before the 'g': once it is sent the command may
	// run, and is never taken for not run.
	w.stop()
	if !stopCtx() && err == nil {
		err = context.Cause(ctx) // closed by the AfterFunc after all
	}
	if err == nil && w.cause() == nil {
		if _, err = t.Write([]byte{'g'}); err == nil {
			return t, nil
		}
	}
	t.Close()
	if err := m.idleFailed(ctx, id, w); err != nil {
		return nil, err
	}
	if endedEarly(err) {
		return nil, nil // gone before it took the command: a new one takes it
	}
	return nil, err
}

// spareTimeout bounds the start of a spare supervisor.
const spareTimeout = 30 * time.Second

// refillSpare starts a spare supervisor for container id's channel in the
// background, unless it has one or one is being started.
func (m *Manager) refillSpare(ctx context.Context, id string) {
	ch, err := m.channelOf(ctx, id)
	if err != nil || !ch.client.Hello().HasTool(kernel.ToolSpare) || !ch.startRefill() {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), spareTimeout)
		defer cancel()
		t, err := m.spawnTool(ctx, id, kernel.ToolSpare)
		if err != nil {
			ch.endRefill(nil)
			return
		}
		if !ch.endRefill(t) {
			t.Close()
		}
	}()
}

// startSupervisor starts a command's supervisor in container id: the
// command tool on the container's channel, or, when its init runs no
// tools, the supervisor by the driver's exec.
func (m *Manager) startSupervisor(ctx context.Context, id string) (CommandStream, error) {
	t, err := m.spawnTool(ctx, id, kernel.ToolCommand)
	if err == nil {
		return t, nil
	}
	if !errors.Is(err, errNoChannel) {
		return nil, err
	}
	cs, ok := m.drv.(commandStreamer)
	if !ok {
		return nil, fmt.Errorf("the driver cannot run commands in a container: %w", errors.ErrUnsupported)
	}
	return cs.StreamCommand(ctx, id, supervisorUser, supervisorCommand())
}
