package mcpserver_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/mcpserver"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// fakeManager is a Manager over the in-memory driver: no engine.
func fakeManager(t *testing.T, d *sessiontest.Driver) *session.Manager {
	t.Helper()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(d))
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
	})
	return m
}

// running counts the driver's running containers.
func running(d *sessiontest.Driver) int {
	n := 0
	for _, c := range d.Containers() {
		if c.Running {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMCPSessionSandboxEndsWithIt: a client that opens an MCP session per
// tool call (LangGraph's MCP adapter does) and names no session gets a
// sandbox that ends when its MCP session closes, not one container per
// call left running for IDLE_TIMEOUT_S (issue 24 row 6). A sandbox named
// by the argument or the header outlives the MCP session that used it.
func TestMCPSessionSandboxEndsWithIt(t *testing.T) {
	d := sessiontest.NewDriver()
	m := fakeManager(t, d)
	srv := httpServer(t, m, mcpserver.Options{})

	for i := range 3 {
		cs := httpClient(t, srv, "", nil)
		want(t, cs, "run_python", args("code", "x = 1"), false)
		if n := running(d); n != 1 {
			t.Fatalf("call %d: %d containers running, want 1", i, n)
		}
		if err := cs.Close(); err != nil { // DELETE of the HTTP MCP session
			t.Fatalf("close MCP session: %v", err)
		}
		waitFor(t, "stopped with its MCP session", func() bool { return running(d) == 0 })
	}
	if list, err := m.List(context.Background()); err != nil || len(list) != 0 {
		t.Errorf("sessions left after their MCP sessions closed: %+v, %v", list, err)
	}

	// Named sessions are the client's to keep.
	named := httpClient(t, srv, "", nil)
	want(t, named, "run_python", args("code", "y = 2", "session", "thread-1"), false)
	named.Close()
	headed := httpClient(t, srv, "", http.Header{mcpserver.SessionHeader: {"thread-2"}})
	want(t, headed, "run_python", args("code", "z = 3"), false)
	headed.Close()
	again := httpClient(t, srv, "", http.Header{mcpserver.SessionHeader: {"thread-2"}})
	want(t, again, "run_python", args("code", "print(z)"), false, "3")
	want(t, again, "run_python", args("code", "print(y)", "session", "thread-1"), false, "2")
}

// TestMCPSessionSandboxEndsOnTimeout: an MCP session the client never
// closes ends after Options.SessionTimeout, and its sandbox with it.
func TestMCPSessionSandboxEndsOnTimeout(t *testing.T) {
	d := sessiontest.NewDriver()
	m := fakeManager(t, d)
	srv := httpServer(t, m, mcpserver.Options{SessionTimeout: 500 * time.Millisecond})
	cs := httpClient(t, srv, "", nil)
	want(t, cs, "run_python", args("code", "x = 1"), false)
	waitFor(t, "stopped after the MCP session timed out", func() bool { return running(d) == 0 })
}
