package kernel_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// toolInit is a fake init that runs tools as the real one does
// (sandbox-image/agentbox_tools.py): each tool echoes its input to its
// output, and the init keeps to the host's window: it sends no more output
// than the host has acknowledged room for. It records the most output it
// ever had in flight for a tool, and the most input the host sent ahead
// of its acks.
type toolInit struct {
	mu          sync.Mutex
	w           io.Writer
	unacked     map[string]int // output sent, not acknowledged
	maxUnacked  int
	maxInflight int
	pending     map[string][]byte // output waiting for credit
	inflight    map[string]int    // input received, not acknowledged
	holdAcks    map[string]bool   // input of these tools is not acknowledged
	eof         map[string]bool   // input ended: "end" once the output is out
}

func newToolClient(t *testing.T, ti *toolInit) *kernel.Client {
	t.Helper()
	host, init := net.Pipe()
	ti.w = init
	ti.unacked, ti.pending, ti.inflight = map[string]int{}, map[string][]byte{}, map[string]int{}
	ti.eof = map[string]bool{}
	if ti.holdAcks == nil {
		ti.holdAcks = map[string]bool{}
	}
	go func() {
		defer init.Close()
		ti.write([]byte(`{"type":"hello","protocol":4,"tools":["files","command"]}` + "\n"))
		r := bufio.NewReader(init)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var req struct {
				Type, Req, Tool string
				N               int
			}
			if json.Unmarshal(line, &req) != nil {
				return
			}
			switch req.Type {
			case "spawn":
				ti.frame(map[string]any{"type": "spawned", "req": req.Req, "pid": 7}, nil)
			case "in":
				data := make([]byte, req.N)
				if _, err := io.ReadFull(r, data); err != nil {
					return
				}
				ti.mu.Lock()
				ti.inflight[req.Req] += req.N
				ti.maxInflight = max(ti.maxInflight, ti.inflight[req.Req])
				hold := ti.holdAcks[req.Req]
				if !hold {
					ti.inflight[req.Req] -= req.N
				}
				ti.pending[req.Req] = append(ti.pending[req.Req], data...)
				ti.mu.Unlock()
				if !hold {
					ti.frame(map[string]any{"type": "ack", "req": req.Req, "n": req.N}, nil)
				}
				ti.pump(req.Req)
			case "ack":
				ti.mu.Lock()
				ti.unacked[req.Req] -= req.N
				ti.mu.Unlock()
				ti.pump(req.Req)
			case "eof":
				ti.mu.Lock()
				ti.eof[req.Req] = true
				ti.mu.Unlock()
				ti.pump(req.Req)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := kernel.NewClient(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (ti *toolInit) write(p []byte) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.w.Write(p)
}

func (ti *toolInit) frame(f map[string]any, payload []byte) {
	b, _ := json.Marshal(f)
	ti.write(append(append(b, '\n'), payload...))
}

// pump sends tool req's pending output as far as its credit goes. The
// frames are written outside the lock: net.Pipe blocks until the host
// reads, and the host's reader may be sending an ack meanwhile.
func (ti *toolInit) pump(req string) {
	for {
		ti.mu.Lock()
		room := kernel.ToolWindow - ti.unacked[req]
		n := min(room, len(ti.pending[req]), 64<<10)
		if len(ti.pending[req]) == 0 && ti.eof[req] {
			delete(ti.eof, req)
			ti.mu.Unlock()
			ti.frame(map[string]any{"type": "end", "req": req}, nil)
			return
		}
		if n <= 0 {
			ti.mu.Unlock()
			return
		}
		chunk := ti.pending[req][:n]
		ti.pending[req] = ti.pending[req][n:]
		ti.unacked[req] += n
		ti.maxUnacked = max(ti.maxUnacked, ti.unacked[req])
		ti.mu.Unlock()
		b, _ := json.Marshal(map[string]any{"type": "out", "req": req, "n": n})
		ti.write(append(append(b, '\n'), chunk...))
	}
}

func TestToolEchoesThroughItsWindow(t *testing.T) {
	ti := &toolInit{}
	c := newToolClient(t, ti)
	ctx := context.Background()
	tl, err := c.Spawn(ctx, kernel.ToolFiles)
	if err != nil {
		t.Fatal(err)
	}
	if tl.PID() != 7 {
		t.Fatalf("pid = %d", tl.PID())
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16) // 3 window's worth
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(tl); got <- b }()
	if _, err := tl.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tl.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, data) {
			t.Fatalf("read %d bytes, want the %d written", len(b), len(data))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the echo did not end")
	}
	if ti.maxUnacked > kernel.ToolWindow {
		t.Fatalf("the init had %d bytes unacknowledged", ti.maxUnacked)
	}
}

// A tool whose reader does not read holds no other tool, and the host
// never sends input past the window the init acknowledged.
func TestToolSlowReaderHoldsOnlyItself(t *testing.T) {
	ti := &toolInit{holdAcks: map[string]bool{}}
	c := newToolClient(t, ti)
	ctx := context.Background()
	slow, err := c.Spawn(ctx, kernel.ToolCommand)
	if err != nil {
		t.Fatal(err)
	}
	// Two windows of output nobody reads.
	if _, err := slow.Write(make([]byte, 2*kernel.ToolWindow)); err != nil {
		t.Fatal(err)
	}
	fast, err := c.Spawn(ctx, kernel.ToolFiles)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		if _, err := fast.Write([]byte("ping")); err != nil {
			done <- err
			return
		}
		b := make([]byte, 4)
		_, err := io.ReadFull(fast, b)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a tool waited behind another tool's unread output")
	}

	// Input: the init acknowledges nothing of this tool; the host's
	// writer stops at the window.
	ti.mu.Lock()
	ti.holdAcks["t3"] = true // the third tool spawned
	ti.mu.Unlock()
	held, err := c.Spawn(ctx, kernel.ToolFiles)
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() { held.Write(make([]byte, 3*kernel.ToolWindow)); close(wrote) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ti.mu.Lock()
		in := ti.maxInflight
		ti.mu.Unlock()
		if in >= kernel.ToolWindow || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-wrote:
		t.Fatal("the write went past the window the init acknowledged")
	default:
	}
	held.Close()
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a write waiting for room")
	}
	ti.mu.Lock()
	defer ti.mu.Unlock()
	if ti.maxInflight > kernel.ToolWindow {
		t.Fatalf("the host sent %d bytes ahead of the init's acks (window %d)", ti.maxInflight, kernel.ToolWindow)
	}
}

func TestToolFailsWithTheStream(t *testing.T) {
	c := newToolClient(t, &toolInit{})
	tl, err := c.Spawn(context.Background(), kernel.ToolFiles)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := tl.Read(make([]byte, 1)); !errors.Is(err, kernel.ErrClosed) && !errors.Is(err, kernel.ErrConnectionLost) {
		t.Fatalf("read after the stream ended: %v", err)
	}
	if _, err := c.Spawn(context.Background(), kernel.ToolFiles); err == nil {
		t.Fatal("spawn on a closed client worked")
	}
}

func TestSpawnWithoutTools(t *testing.T) {
	c := scripted(t, hello, func(map[string]any) []string { return nil })
	if _, err := c.Spawn(context.Background(), kernel.ToolFiles); !errors.Is(err, kernel.ErrNoTools) {
		t.Fatalf("err = %v, want ErrNoTools", err)
	}
}
