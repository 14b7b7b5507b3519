package mcpserver

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/session"
)

// stopTimeout bounds the stop of a sandbox session whose MCP session ended.
const stopTimeout = time.Minute

// endWith stops the sandbox session of key when the MCP session ss ends
// (the client's DELETE, Options.SessionTimeout idle, or the server
// closing it). key is the sandbox session that calls of ss naming none
// default to: nobody else can reach it by that name, and a client that
// opens an MCP session per tool call (LangGraph's MCP adapter does) would
// otherwise leave one container per call running for IDLE_TIMEOUT_S. A
// sandbox named by the "session" argument or the header is the client's
// to keep and is not watched.
//
// One goroutine per MCP session, ending with it: the SDK's Close waits for
// the calls in flight, so the stop never cuts one short.
func (s *server) endWith(ss *mcp.ServerSession, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ending[ss] {
		return
	}
	s.ending[ss] = true
	go func() {
		_ = ss.Wait() // the reason it ended does not change what to do
		s.mu.Lock()
		delete(s.ending, ss)
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		switch err := s.m.Stop(ctx, key); {
		case err == nil:
			s.opts.Logger.Info("mcp session ended; its sandbox session stopped", "session_key", key)
		case errors.Is(err, session.ErrNotFound), errors.Is(err, session.ErrClosed):
			// Never started (session_info only), reset, or the server is
			// shutting down: nothing to stop.
		default:
			s.opts.Logger.Warn("stop the sandbox session of an ended mcp session", "session_key", key, "err", err)
		}
	}()
}
