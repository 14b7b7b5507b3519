package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultInterruptWait is how long Execute waits for the result after the
// caller's context ends and the code was interrupted: the init's grace period
// (5 s by default) plus a kernel restart.
const DefaultInterruptWait = 15 * time.Second

// Liveness defaults: how long the init may take to answer a ping, how often
// a long wait checks on it, and how long one write may block.
const (
	DefaultPingTimeout   = 5 * time.Second
	DefaultCheckInterval = 10 * time.Second
	DefaultWriteTimeout  = 30 * time.Second
)

// Client speaks the kernel protocol over one byte stream. It is safe for
// concurrent use: executions from one client (or from many clients of one
// kernel) are serialized by the kernel, and each reply reaches only the call
// that asked for it.
type Client struct {
	rw    io.ReadWriteCloser
	hello Hello

	// InterruptWait bounds the wait for a result after cancellation.
	InterruptWait time.Duration
	// PingTimeout is how long the init may take to answer a liveness
	// ping; CheckInterval how often a long wait pings it; WriteTimeout how
	// long one frame may take to write. An init that misses one makes the
	// call fail with ErrUnresponsive, so no call waits on a dead PID 1.
	PingTimeout, CheckInterval, WriteTimeout time.Duration

	wmu sync.Mutex // serializes frames on the wire

	mu     sync.Mutex
	execs  map[string]*call // by execution id
	reqs   map[string]*call // by request tag
	tools  map[string]*Tool // by request tag
	nextID uint64
	err    error // set once the reader stops
	done   chan struct{}
}

// call is one request waiting for its reply.
type call struct {
	id      string
	onEvent func(Event)
	res     Result
	out     strings.Builder
	errb    strings.Builder
	state   *State
	files   []File
	more    bool
	reply   chan error // receives nil on the final frame, or the error
	started bool
}

// NewClient reads the kernel's hello from rw and checks the protocol version.
// The client owns rw from then on and closes it in Close. If ctx ends before
// the hello arrives, rw is closed.
func NewClient(ctx context.Context, rw io.ReadWriteCloser) (*Client, error) {
	fr := newFrameReader(rw, MaxFrame)
	type helloResult struct {
		h   Hello
		err error
	}
	got := make(chan helloResult, 1)
	go func() {
		line, err := fr.next()
		if err != nil {
			got <- helloResult{err: fmt.Errorf("%w: reading hello: %w", ErrConnectionLost, err)}
			return
		}
		f, err := decodeFrame(line)
		if err != nil {
			got <- helloResult{err: err}
			return
		}
		if f.Type != "hello" {
			got <- helloResult{err: fmt.Errorf("%w: expected hello, got %q", ErrProtocol, f.Type)}
			return
		}
		var h Hello
		if err := unmarshal(line, &h); err != nil {
			got <- helloResult{err: err}
			return
		}
		got <- helloResult{h: h}
	}()
	var hr helloResult
	select {
	case hr = <-got:
	case <-ctx.Done():
		rw.Close()
		<-got
		return nil, fmt.Errorf("wait for kernel hello: %w", ctx.Err())
	}
	if hr.err != nil {
		rw.Close()
		return nil, hr.err
	}
	if hr.h.Protocol != ProtocolVersion {
		rw.Close()
		return nil, &VersionError{Got: hr.h.Protocol, Want: ProtocolVersion}
	}
	c := &Client{
		rw:            rw,
		hello:         hr.h,
		InterruptWait: DefaultInterruptWait,
		PingTimeout:   DefaultPingTimeout,
		CheckInterval: DefaultCheckInterval,
		WriteTimeout:  DefaultWriteTimeout,
		execs:         make(map[string]*call),
		reqs:          make(map[string]*call),
		tools:         make(map[string]*Tool),
		done:          make(chan struct{}),
	}
	go c.readLoop(fr)
	return c, nil
}

// Hello returns what the kernel announced on connect.
func (c *Client) Hello() Hello { return c.hello }

// Close closes the stream. Calls in flight fail with ErrClosed; executions
// they started keep running in the kernel and can be fetched by id.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.err == nil {
		c.err = ErrClosed
	}
	c.mu.Unlock()
	err := c.rw.Close()
	<-c.done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Done is closed when the stream to the kernel ends.
func (c *Client) Done() <-chan struct{} { return c.done }

// NewID returns a random execution id.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ExecRequest is one piece of code to run.
type ExecRequest struct {
	// ID names the execution; empty picks a random one. Running an id the
	// kernel already knows returns the recorded result instead of running
	// the code again (an agent passes its tool-call id).
	ID   string
	Code string
	// Timeout, when positive, is enforced by the kernel itself, so it holds
	// even if this client disappears.
	Timeout time.Duration
	// ScanDir, when set, is a folder whose files the kernel lists into the
	// result (Result.Files) once the code finished, at most ScanMax
	// (default 10 000): how new artifacts are found without another round
	// trip.
	ScanDir string
	ScanMax int
}

// Execute runs code and returns its result. onEvent, if not nil, sees every
// event as it arrives, in order, from the client's reader goroutine (it must
// not block for long). A Python exception is data in Result.Error, not an
// error. When ctx ends, the code is interrupted (KeyboardInterrupt) and the
// result, flagged TimedOut or Interrupted, is still returned. A Go error means
// the transport failed; it is an *ExecError carrying the id to fetch later.
func (c *Client) Execute(ctx context.Context, req ExecRequest, onEvent func(Event)) (*Result, error) {
	if req.ID == "" {
		req.ID = NewID()
	}
	cl := &call{id: req.ID, onEvent: onEvent, reply: make(chan error, 1)}
	cl.res.ID = req.ID
	tag, err := c.register(cl, true)
	if err != nil {
		return nil, &ExecError{ID: req.ID, Err: err}
	}
	defer c.unregister(cl, tag)
	code := req.Code
	r := request{Type: "execute", Req: tag, ID: req.ID, Code: &code}
	if req.Timeout > 0 {
		t := req.Timeout.Seconds()
		r.Timeout = &t
	}
	if req.ScanDir != "" {
		r.Scan = &scanOpt{Path: req.ScanDir, Max: req.ScanMax}
		if r.Scan.Max <= 0 {
			r.Scan.Max = 10000
		}
	}
	if err := c.send(r); err != nil {
		return nil, &ExecError{ID: req.ID, Err: err}
	}
	// The init ends the code at its time limit and, if it ignores
	// SIGINT, kills it a grace period later: a result later than that
	// means the init itself is in trouble, so it is checked on then at
	// the latest.
	quiet := time.Duration(0)
	if req.Timeout > 0 {
		quiet = req.Timeout + c.InterruptWait
	}
	return c.wait(ctx, cl, quiet)
}

// Fetch returns the result of an execution by id, waiting for it if it is
// still running, and replaying its events to onEvent. ErrUnknownExecution
// means the kernel never ran it (or has forgotten it).
func (c *Client) Fetch(ctx context.Context, id string, onEvent func(Event)) (*Result, error) {
	cl := &call{id: id, onEvent: onEvent, reply: make(chan error, 1)}
	cl.res.ID = id
	tag, err := c.register(cl, true)
	if err != nil {
		return nil, &ExecError{ID: id, Err: err}
	}
	defer c.unregister(cl, tag)
	if err := c.send(request{Type: "get", Req: tag, ID: id}); err != nil {
		return nil, &ExecError{ID: id, Err: err}
	}
	return c.wait(ctx, cl, 0)
}

// wait waits for an execution's result; quiet is how long it may fairly
// take before the init is checked on (see awaitReply).
func (c *Client) wait(ctx context.Context, cl *call, quiet time.Duration) (*Result, error) {
	err, stopped := c.awaitReply(ctx, cl, quiet)
	if stopped == nil {
		return c.finish(cl, err, nil)
	}
	// The caller gave up: interrupt the code, and give the kernel the grace
	// period (and a restart) to report what happened.
	_ = c.send(request{Type: "interrupt", ID: cl.id})
	timer := time.NewTimer(c.InterruptWait)
	defer timer.Stop()
	select {
	case err := <-cl.reply:
		return c.finish(cl, err, stopped)
	case <-timer.C:
	}
	if err := c.alive(); err != nil {
		return nil, &ExecError{ID: cl.id, Err: err}
	}
	return nil, &ExecError{ID: cl.id, Err: fmt.Errorf("no result %s after interrupting it: %w", c.InterruptWait, stopped)}
}

// awaitReply waits for cl's final reply, or for ctx to end (then it returns
// ctx's error as stopped). While no reply came it pings the init, first
// after quiet or CheckInterval, whichever is sooner (0: CheckInterval), then
// every CheckInterval: not only once the call is overdue, because a
// container removed under gVisor can leave its exec stream open without
// end, and its caller should not wait out the whole time limit to learn the
// session is gone. An init that answers is busy, not gone (a call may wait
// behind another client's execution); one that answers nothing within
// PingTimeout fails the call with ErrUnresponsive.
func (c *Client) awaitReply(ctx context.Context, cl *call, quiet time.Duration) (err, stopped error) {
	if quiet <= 0 || quiet > c.CheckInterval {
		quiet = c.CheckInterval
	}
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	for {
		select {
		case err := <-cl.reply:
			return err, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
		if err := c.alive(); err != nil {
			select {
			case rerr := <-cl.reply: // it came meanwhile
				return rerr, nil
			default:
			}
			return err, nil
		}
		timer.Reset(c.CheckInterval)
	}
}

// alive pings the init; one that does not answer in time is unresponsive,
// and the stream to it is closed so that every call on it fails alike.
func (c *Client) alive() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.PingTimeout)
	defer cancel()
	err := c.Ping(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: no answer to a ping within %s", ErrUnresponsive, c.PingTimeout)
		c.fail(err)
	}
	return err
}

// fail ends the client with err: every call in flight, and every later
// one, returns it.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	_ = c.rw.Close()
}

func (c *Client) finish(cl *call, err error, ctxErr error) (*Result, error) {
	if err != nil {
		return nil, &ExecError{ID: cl.id, Err: err}
	}
	res := cl.res
	res.Stdout = cl.out.String()
	res.Stderr = cl.errb.String()
	if res.Outputs == nil {
		res.Outputs = []Output{} // "results": [] in JSON, never null
	}
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		res.TimedOut = true
		res.Interrupted = false
	}
	return &res, nil
}

// Interrupt raises KeyboardInterrupt in the execution id (or in whatever
// runs, if id is empty); an execution still queued finishes without running.
func (c *Client) Interrupt(ctx context.Context, id string) error {
	return c.send(request{Type: "interrupt", ID: id})
}

// Inspect returns a summary of the kernel's namespace. It waits for a
// running execution to finish first.
func (c *Client) Inspect(ctx context.Context) (*State, error) {
	cl := &call{reply: make(chan error, 1)}
	tag, err := c.register(cl, false)
	if err != nil {
		return nil, err
	}
	defer c.unregister(cl, tag)
	if err := c.send(request{Type: "inspect", Req: tag}); err != nil {
		return nil, err
	}
	err, stopped := c.awaitReply(ctx, cl, 0)
	if stopped != nil {
		return nil, fmt.Errorf("inspect: %w", stopped)
	}
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	return cl.state, nil
}

// Scan lists the files under dir in the container, at most max of them
// (more reports that there were others), without following symbolic links.
// A missing dir is an empty list. The session manager uses it to find the
// artifacts an execution wrote.
func (c *Client) Scan(ctx context.Context, dir string, max int) (files []File, more bool, err error) {
	cl := &call{reply: make(chan error, 1)}
	tag, err := c.register(cl, false)
	if err != nil {
		return nil, false, err
	}
	defer c.unregister(cl, tag)
	if err := c.send(request{Type: "scan", Req: tag, Path: dir, Max: max}); err != nil {
		return nil, false, err
	}
	err, stopped := c.awaitReply(ctx, cl, 0)
	if stopped != nil {
		return nil, false, fmt.Errorf("scan %s: %w", dir, stopped)
	}
	if err != nil {
		return nil, false, fmt.Errorf("scan %s: %w", dir, err)
	}
	return cl.files, cl.more, nil
}

// Ping checks that the init answers.
func (c *Client) Ping(ctx context.Context) error {
	cl := &call{reply: make(chan error, 1)}
	tag, err := c.register(cl, false)
	if err != nil {
		return err
	}
	defer c.unregister(cl, tag)
	if err := c.send(request{Type: "ping", Req: tag}); err != nil {
		return err
	}
	select {
	case err := <-cl.reply:
		return err
	case <-ctx.Done():
		return fmt.Errorf("ping: %w", ctx.Err())
	}
}

func (c *Client) register(cl *call, byID bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return "", c.err
	}
	if byID {
		if _, busy := c.execs[cl.id]; busy {
			return "", fmt.Errorf("%w: execution %s is already awaited on this client", ErrRejected, cl.id)
		}
		c.execs[cl.id] = cl
	}
	c.nextID++
	tag := strconv.FormatUint(c.nextID, 10)
	c.reqs[tag] = cl
	return tag, nil
}

func (c *Client) unregister(cl *call, tag string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reqs, tag)
	if cl.id != "" && c.execs[cl.id] == cl {
		delete(c.execs, cl.id)
	}
}

func (c *Client) send(r request) error { return c.sendData(r, nil) }

// sendData writes request r followed by payload, as one write.
func (c *Client) sendData(r request, payload []byte) error {
	data, err := encodeRequest(r)
	if err != nil {
		return fmt.Errorf("%w: encode request: %v", ErrProtocol, err)
	}
	return c.write(append(data, payload...))
}

// write writes encoded frames as one write.
func (c *Client) write(data []byte) error {
	var err error
	c.mu.Lock()
	err = c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if d, ok := c.rw.(interface{ SetWriteDeadline(time.Time) error }); ok && c.WriteTimeout > 0 {
		// A second more per MiB: a large cell takes its time to cross.
		_ = d.SetWriteDeadline(time.Now().Add(c.WriteTimeout + time.Duration(len(data)>>20)*time.Second))
		defer d.SetWriteDeadline(time.Time{})
	}
	if _, err := c.rw.Write(data); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Part of the frame may be on the wire: the stream is
			// unusable, and the init is not reading.
			err = fmt.Errorf("%w: it read nothing for %s", ErrUnresponsive, c.WriteTimeout)
			c.fail(err)
			return err
		}
		return fmt.Errorf("%w: %w", ErrConnectionLost, err)
	}
	return nil
}

func (c *Client) readLoop(fr *frameReader) {
	var err error
	for {
		var line []byte
		line, err = fr.next()
		if err != nil {
			break
		}
		if skippable(line) {
			continue
		}
		var f frame
		f, err = decodeFrame(line)
		if err != nil {
			break
		}
		if (f.Type == "out" || f.Type == "err") && !strings.HasPrefix(f.Req, "t") {
			err = fmt.Errorf("%w: a %s frame for request %q, not a tool", ErrProtocol, f.Type, f.Req)
			break
		}
		if strings.HasPrefix(f.Req, "t") {
			// A tool's frame; "out" and "err" carry bytes after them.
			var payload []byte
			if f.Type == "out" || f.Type == "err" {
				if f.N <= 0 || f.N > toolChunk {
					err = fmt.Errorf("%w: a tool frame of %d bytes", ErrProtocol, f.N)
					break
				}
				if payload, err = fr.payload(f.N); err != nil {
					break
				}
			}
			c.mu.Lock()
			t := c.tools[f.Req]
			c.mu.Unlock()
			// A tool that was let go: its frames are dropped (the init
			// closed its end, and the reader loop never writes).
			if t != nil {
				c.dispatchTool(t, f, payload)
			}
			continue
		}
		if err = c.dispatch(f, line); err != nil {
			break
		}
	}
	c.mu.Lock()
	if c.err == nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: the stream ended", ErrConnectionLost)
		} else if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrFrameTooLarge) {
			err = fmt.Errorf("%w: %w", ErrConnectionLost, err)
		}
		c.err = err
	}
	final := c.err
	// Nothing more can be read, so nothing written can be answered: close
	// the stream so that a writer blocked on it returns.
	_ = c.rw.Close()
	pending := make([]*call, 0, len(c.reqs))
	for _, cl := range c.reqs {
		pending = append(pending, cl)
	}
	tools := make([]*Tool, 0, len(c.tools))
	for _, t := range c.tools {
		tools = append(tools, t)
	}
	c.mu.Unlock()
	for _, cl := range pending {
		deliver(cl, final)
	}
	for _, t := range tools {
		t.fail(final)
	}
	close(c.done)
}

func (c *Client) dispatch(f frame, line []byte) error {
	c.mu.Lock()
	var cl *call
	if f.Req != "" {
		cl = c.reqs[f.Req]
	}
	if cl == nil && f.ID != "" {
		cl = c.execs[f.ID]
	}
	c.mu.Unlock()
	if cl == nil {
		return nil // a reply for a call that gave up
	}
	switch f.Type {
	case "accepted":
	case "started":
		cl.started = true
		cl.res.ExecutionCount = f.Event.ExecutionCount
		if cl.onEvent != nil {
			cl.onEvent(f.Event)
		}
	case "stream":
		if f.Name == "stderr" {
			cl.errb.WriteString(f.Text)
		} else {
			cl.out.WriteString(f.Text)
		}
		if cl.onEvent != nil {
			cl.onEvent(f.Event)
		}
	case "display":
		cl.res.Outputs = append(cl.res.Outputs, Output{Kind: f.Kind, Data: f.Data})
		if cl.onEvent != nil {
			cl.onEvent(f.Event)
		}
	case "result":
		r := &cl.res
		r.ExecutionCount = f.Event.ExecutionCount
		r.Error = f.Error
		r.TimedOut = f.TimedOut
		r.Interrupted = f.Interrupted
		r.KernelRestarted = f.KernelRestarted
		r.StateLost = f.StateLost
		r.RestartReason = f.RestartReason
		r.Truncated = f.Truncated
		r.Duration = time.Duration(f.DurationMS * float64(time.Millisecond))
		r.Replayed = f.Replayed
		r.Files, r.More = f.Files, f.More
		deliver(cl, nil)
	case "state":
		var st State
		if err := unmarshal(line, &st); err != nil {
			return err
		}
		cl.state = &st
		deliver(cl, nil)
	case "files":
		cl.files, cl.more = f.Files, f.More
		deliver(cl, nil)
	case "pong":
		deliver(cl, nil)
	case "error":
		deliver(cl, remoteError(f.Code, f.Msg))
	}
	return nil
}

// deliver completes a call once; later replies for it are dropped.
func deliver(cl *call, err error) {
	select {
	case cl.reply <- err:
	default:
	}
}
