package session

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// The channel of a container: one connection to its init, kept open,
// over which the files API's calls and shell commands run as tools the
// init forks (kernel.Client.Spawn, sandbox-image/agentbox_tools.py), many
// at once, each with its own flow control. A call then costs a fork in the
// container and a round trip on a stream that is already open, where an
// engine exec per call cost tens of milliseconds. Executions keep their
// own connection (entry.client), whose lifetime follows the session's
// turn: a pause, an idle close or a reconnect after an interrupt must not
// end a command that runs beside the kernel.
//
// An init that runs no tools (an in-memory driver's kernel) is served by
// the driver's exec, as before.

// spawnCheck is how long a tool's start is waited for before the
// container is looked at (a frozen or dead one never answers); then every
// spawnRecheck.
const (
	spawnCheck   = 250 * time.Millisecond
	spawnRecheck = time.Second
)

// channels holds the channel of each container this Manager reached; the
// zero value is ready.
type channels struct {
	mu   sync.Mutex
	byID map[string]*channel
}

type channel struct {
	ready  chan struct{} // closed when the dial ended
	client *kernel.Client
	err    error

	mu       sync.Mutex
	idle     []*keptTool   // files tools waiting for a call (filehelper.go)
	spare    *toolStream   // a supervisor waiting for a command (shell_run.go)
	refilled chan struct{} // while a spare is being started: closed when it is
	gone     bool          // forgotten: a tool given back is let go
}

// takeSpare returns the channel's spare supervisor, or nil. A spare being
// started is waited for (or ctx): it is further along than a start of
// the caller's own would be.
func (ch *channel) takeSpare(ctx context.Context) *toolStream {
	ch.mu.Lock()
	wait := ch.refilled
	ch.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil
		}
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t := ch.spare
	ch.spare = nil
	return t
}

// startRefill says whether the caller is to start a spare: none is kept
// or being started.
func (ch *channel) startRefill() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.gone || ch.spare != nil || ch.refilled != nil {
		return false
	}
	ch.refilled = make(chan struct{})
	return true
}

// endRefill keeps t (nil: the start failed) as the spare; false when the
// channel takes it no more (the caller lets it go).
func (ch *channel) endRefill(t *toolStream) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	close(ch.refilled)
	ch.refilled = nil
	if t == nil || ch.gone || ch.spare != nil {
		return false
	}
	ch.spare = t
	return true
}

// maxIdleFilesTools is how many files tools a channel keeps between calls:
// a call that finds none pays a fork in the container, which costs several
// milliseconds on a virtual machine whose page tables are slow to copy.
const maxIdleFilesTools = 4

// keptTool is a files tool between calls, with the reader of its answers
// (which may hold what it read ahead).
type keptTool struct {
	t *toolStream
	r *bufio.Reader
}

// takeIdle returns one of the channel's idle files tools, or nil.
func (ch *channel) takeIdle() *keptTool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if n := len(ch.idle); n > 0 {
		kt := ch.idle[n-1]
		ch.idle = ch.idle[:n-1]
		return kt
	}
	return nil
}

// keep gives a files tool back for the next call; false when the channel
// keeps no more (the caller lets it go).
func (ch *channel) keep(kt *keptTool) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.gone || len(ch.idle) >= maxIdleFilesTools {
		return false
	}
	ch.idle = append(ch.idle, kt)
	return true
}

// letGo closes the idle tools and the spare; none is kept after it.
func (ch *channel) letGo() {
	ch.mu.Lock()
	idle, spare := ch.idle, ch.spare
	ch.idle, ch.spare, ch.gone = nil, nil, true
	ch.mu.Unlock()
	for _, kt := range idle {
		kt.t.Close()
	}
	if spare != nil {
		spare.Close()
	}
}

// errNoChannel means the container's init runs no tools: the caller takes
// the driver's exec.
var errNoChannel = errors.New("no channel to the init")

// channel returns the open channel of container id, dialing it if needed
// (once, whoever asks at the same time).
func (m *Manager) channel(ctx context.Context, id string) (*kernel.Client, error) {
	ch, err := m.channelOf(ctx, id)
	if err != nil {
		return nil, err
	}
	return ch.client, nil
}

// channelOf is channel, with what the Manager keeps beside the client.
func (m *Manager) channelOf(ctx context.Context, id string) (*channel, error) {
	if !m.channelOn {
		return nil, errNoChannel
	}
	for attempt := 0; ; attempt++ {
		m.chans.mu.Lock()
		if m.chans.byID == nil {
			m.chans.byID = map[string]*channel{}
		}
		ch := m.chans.byID[id]
		mine := ch == nil
		if mine {
			ch = &channel{ready: make(chan struct{})}
			m.chans.byID[id] = ch
		}
		m.chans.mu.Unlock()
		if mine {
			ch.client, ch.err = m.dialChannel(ctx, id)
			if ch.err != nil {
				m.chans.forget(id, ch)
			}
			close(ch.ready)
			if ch.err == nil {
				// Its container's end (a stop, an eviction, a loss)
				// ends the stream: the channel goes with it, rather
				// than wait for a call on an id no one asks for again.
				go func() {
					<-ch.client.Done()
					m.chans.forget(id, ch)
				}()
			}
			if ch.err != nil {
				return nil, ch.err
			}
			return ch, nil
		}
		select {
		case <-ch.ready:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if ch.err == nil {
			select {
			case <-ch.client.Done():
				m.chans.forget(id, ch) // the stream ended: a new one
				continue
			default:
				return ch, nil
			}
		}
		if errors.Is(ch.err, errNoChannel) || attempt > 0 {
			return nil, ch.err
		}
		// Another caller's dial failed (its context, perhaps): one of our own.
	}
}

func (m *Manager) dialChannel(ctx context.Context, id string) (*kernel.Client, error) {
	c, err := m.dial(ctx, id)
	if err != nil {
		// A frozen container takes no new stream, and the engine says
		// so in its own words: say it in ours.
		if why := m.spawnBlocked(ctx, id); why != nil {
			return nil, why
		}
		return nil, err
	}
	if !c.Hello().HasTool(kernel.ToolFiles) || !c.Hello().HasTool(kernel.ToolCommand) {
		c.Close()
		return nil, errNoChannel
	}
	return c, nil
}

// forget drops ch as id's channel, closing its client.
func (cs *channels) forget(id string, ch *channel) {
	cs.mu.Lock()
	if cs.byID[id] == ch {
		delete(cs.byID, id)
	}
	cs.mu.Unlock()
	select {
	case <-ch.ready:
	default:
		return // its dialer forgets it with the error
	}
	ch.letGo()
	if ch.client != nil {
		ch.client.Close()
	}
}

// drop closes container id's channel, if it has one.
func (cs *channels) drop(id string) {
	cs.mu.Lock()
	ch := cs.byID[id]
	cs.mu.Unlock()
	if ch != nil {
		cs.forget(id, ch)
	}
}

// closeAll closes every channel (Manager.Close).
func (cs *channels) closeAll() {
	cs.mu.Lock()
	all := cs.byID
	cs.byID = nil
	cs.mu.Unlock()
	for _, ch := range all {
		<-ch.ready
		ch.letGo()
		if ch.client != nil {
			ch.client.Close()
		}
	}
}

// spawnTool starts tool in container id over its channel. A container
// that does not answer within spawnCheck is looked at: a frozen one is
// ErrPaused, a dead or removed one ErrSessionLost, as the driver's exec
// says them; the tool, if it starts once thawed, reads the end of its
// input and does nothing. errNoChannel when the init runs no tools.
func (m *Manager) spawnTool(ctx context.Context, id, tool string) (*toolStream, error) {
	return m.spawnToolWith(ctx, id, tool, nil)
}

// spawnToolWith is spawnTool sending first with the start
// (kernel.Client.SpawnWith): only for a call that changes nothing.
func (m *Manager) spawnToolWith(ctx context.Context, id, tool string, first []byte) (*toolStream, error) {
	c, err := m.channel(ctx, id)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer m.watchStart(ctx, id, cancel)()
	tl, err := c.SpawnWith(sctx, tool, first)
	if err == nil {
		return &toolStream{Tool: tl, m: m, ctx: context.WithoutCancel(ctx), id: id}, nil
	}
	if cause := context.Cause(sctx); ctx.Err() == nil && cause != nil {
		if errors.Is(cause, ErrSessionLost) {
			m.chans.drop(id)
		}
		return nil, cause
	}
	if errors.Is(err, kernel.ErrConnectionLost) || errors.Is(err, kernel.ErrClosed) {
		// The stream ended under the call: the container, or its
		// stream? A lost container says so; else one more try on a
		// new channel.
		if lost := m.checkAlive(context.WithoutCancel(ctx), id); lost != nil {
			m.chans.drop(id)
			return nil, lost
		}
		m.chans.drop(id)
		if c, err = m.channel(ctx, id); err != nil {
			return nil, err
		}
		if tl, err = c.SpawnWith(ctx, tool, first); err != nil {
			return nil, err
		}
		return &toolStream{Tool: tl, m: m, ctx: context.WithoutCancel(ctx), id: id}, nil
	}
	return nil, err
}

// toolStream is a tool whose stream failures say what became of the
// container: a channel that ends because its container was killed or
// removed is ErrSessionLost (a *lostError naming why), as a call on a
// lost session is anywhere else.
type toolStream struct {
	*kernel.Tool
	m    *Manager
	ctx  context.Context
	id   string
	once sync.Once
	lost error
}

func (s *toolStream) Read(p []byte) (int, error) {
	n, err := s.Tool.Read(p)
	return n, s.explain(err)
}

func (s *toolStream) Write(p []byte) (int, error) {
	n, err := s.Tool.Write(p)
	return n, s.explain(err)
}

func (s *toolStream) CloseWrite() error { return s.explain(s.Tool.CloseWrite()) }

func (s *toolStream) explain(err error) error {
	if !errors.Is(err, kernel.ErrConnectionLost) {
		return err
	}
	s.once.Do(func() {
		// A container being killed ends its streams a moment before the
		// engine reports it gone: lostSoon looks a few times.
		if lost := s.m.lostSoon(s.ctx, s.id); lost != nil {
			s.m.chans.drop(s.id)
			s.lost = lost
		}
	})
	if s.lost != nil {
		return s.lost
	}
	return err
}

// watchStart looks at container id after spawnCheck, and every
// spawnRecheck after that, until the returned stop is called: a frozen or
// gone container answers no start, so abort is called with why
// (spawnBlocked), once. stop may be called more than once.
func (m *Manager) watchStart(ctx context.Context, id string, abort func(why error)) (stop func()) {
	watched := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(spawnCheck)
		defer t.Stop()
		for {
			select {
			case <-watched:
				return
			case <-t.C:
			}
			if why := m.spawnBlocked(ctx, id); why != nil {
				abort(why)
				return
			}
			t.Reset(spawnRecheck)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(watched) })
		<-done
	}
}

// idleWatch is watchStart for a tool kept idle while it is handed a call:
// it keeps why it gave up.
type idleWatch struct {
	stop func()
	mu   sync.Mutex
	why  error
}

// watchIdle watches container id (watchStart), calling abort when it is
// found frozen or gone.
func (m *Manager) watchIdle(ctx context.Context, id string, abort func()) *idleWatch {
	w := &idleWatch{}
	w.stop = m.watchStart(ctx, id, func(why error) {
		w.mu.Lock()
		w.why = why
		w.mu.Unlock()
		abort()
	})
	return w
}

// cause is why the watch gave up (ErrPaused, ErrSessionLost), or nil.
func (w *idleWatch) cause() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.why
}

// idleFailed says why a call handed to an idle tool failed, when the
// watch or ctx does: nil when the tool itself is the question.
func (m *Manager) idleFailed(ctx context.Context, id string, w *idleWatch) error {
	if why := w.cause(); why != nil {
		if errors.Is(why, ErrSessionLost) {
			m.chans.drop(id)
		}
		return why
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// endedEarly says whether err is a tool's stream that ended (the tool is
// gone) rather than a failure of the channel.
func endedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe)
}

// spawnBlocked says why a tool's start in container id cannot be answered:
// the container is frozen or gone. nil while it runs (or cannot be told).
func (m *Manager) spawnBlocked(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectTimeout)
	defer cancel()
	c, err := m.drv.Inspect(ctx, id)
	switch {
	case errors.Is(err, ErrContainerNotFound):
		return fmt.Errorf("%w: container %s was removed", ErrSessionLost, shortID(id))
	case err != nil:
		return nil
	case c.Paused:
		return fmt.Errorf("%w: container %s is paused", ErrPaused, shortID(id))
	case !c.Running:
		return fmt.Errorf("%w: container %s is not running (%s)", ErrSessionLost, shortID(id), c.Status)
	}
	return nil
}
