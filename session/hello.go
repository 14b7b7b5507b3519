package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// greet waits for the hello of the init behind rw (a new connection to
// container id). Past helloTimeout it looks at the init every
// helloTimeout: one that is stopped fails the wait at once with
// kernel.ErrUnresponsive, as does one that is still silent at helloLimit.
// One whose state cannot be read (the engine is slow, or, under gVisor,
// holds the container of a stopped sandbox) is waited for up to
// helloLimit as well.
func (m *Manager) greet(ctx context.Context, id string, rw io.ReadWriteCloser) (*kernel.Client, error) {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	defer close(watched)
	go func() {
		start := time.Now()
		t := time.NewTimer(helloTimeout)
		defer t.Stop()
		for {
			select {
			case <-watched:
				return
			case <-t.C:
			}
			waited := time.Since(start).Round(time.Second)
			stopped, err := m.initStopped(hctx, id)
			switch {
			case err == nil && stopped:
				cancel(fmt.Errorf("%w: no hello within %s, and its process is stopped", kernel.ErrUnresponsive, waited))
				return
			case waited >= helloLimit:
				cancel(fmt.Errorf("%w: no hello within %s", kernel.ErrUnresponsive, waited))
				return
			case err != nil:
				m.log.Warn("no hello from the init yet, and its state cannot be read", "container_id", shortID(id), "waited", waited, "err", err)
			default:
				m.log.Warn("no hello from the init yet; it runs, so it is waited for", "container_id", shortID(id), "waited", waited)
			}
			t.Reset(helloTimeout)
		}
	}()
	c, err := kernel.NewClient(hctx, rw)
	if err != nil && ctx.Err() == nil && context.Cause(hctx) != nil {
		return nil, context.Cause(hctx)
	}
	return c, err
}

// initStatProbeTimeout bounds the look at the init's state.
const initStatProbeTimeout = 5 * time.Second

// initStopped reports whether container id's first process is stopped (by
// a signal or a tracer), as its /proc/1/stat says, read by root in the
// container.
func (m *Manager) initStopped(ctx context.Context, id string) (bool, error) {
	cs, ok := m.drv.(commandStreamer)
	if !ok {
		return false, fmt.Errorf("read the init's state: the driver cannot run commands in a container: %w", errors.ErrUnsupported)
	}
	ctx, cancel := context.WithTimeout(ctx, initStatProbeTimeout)
	defer cancel()
	s, err := cs.StreamCommand(ctx, id, supervisorUser, []string{"cat", "/proc/1/stat"})
	if err != nil {
		return false, fmt.Errorf("read the init's state in container %s: %w", shortID(id), err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	s.CloseWrite()
	out, err := io.ReadAll(io.LimitReader(s, 4096))
	if err != nil {
		return false, fmt.Errorf("read the init's state in container %s: %w", shortID(id), err)
	}
	state, ok := procState(out)
	if !ok {
		return false, fmt.Errorf("read the init's state in container %s: unexpected %q (%s)", shortID(id), out, lastLine(s.Stderr()))
	}
	return state == 'T' || state == 't', nil
}

// procState returns the state letter of a /proc/<pid>/stat line: the first
// field after the command name, which is in parentheses and may hold
// spaces and parentheses itself.
func procState(stat []byte) (byte, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) || stat[i+1] != ' ' {
		return 0, false
	}
	return stat[i+2], true
}
