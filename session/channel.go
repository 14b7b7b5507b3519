package session

import (
	"context"
	"errors"
	"fmt"
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
}

// errNoChannel means the container's init runs no tools: the caller takes
// the driver's exec.
var errNoChannel = errors.New("no channel to the init")

// channel returns the open channel of container id, dialing it if needed
// (once, whoever asks at the same time).
func (m *Manager) channel(ctx context.Context, id string) (*kernel.Client, error) {
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
			return ch.client, ch.err
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
				return ch.client, nil
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
	watched := make(chan struct{})
	defer close(watched)
	go func() {
		t := time.NewTimer(spawnCheck)
		defer t.Stop()
		for {
			select {
			case <-watched:
				return
			case <-t.C:
			}
			if why := m.spawnBlocked(ctx, id); why != nil {
				cancel(why)
				return
			}
			t.Reset(spawnRecheck)
		}
	}()
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
