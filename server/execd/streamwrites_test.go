package execd

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the writes on the connections it accepts.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, writes: &l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// streamServer serves one stream per request with run, on a listener that
// counts its writes.
func streamServer(t *testing.T, hold time.Duration, run func(s *stream)) (*httptest.Server, *countingListener) {
	t.Helper()
	h := newHandler(nil, Options{PingInterval: time.Hour})
	h.holdFor = hold
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := h.startStream(&call{w: w, r: r})
		run(s)
		s.close()
	}))
	cl := &countingListener{Listener: srv.Listener}
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, cl
}

// TestShortStreamIsOneWrite: a stream with no output (init, the count and
// the completion, as a `pass` or a `true` sends) reaches the client in one
// write, headers and the response's end with it: one write per event was
// most of what serving a call cost over the library.
func TestShortStreamIsOneWrite(t *testing.T) {
	t.Parallel()
	// The pauses give a writer that does not hold its events the time to
	// write each alone; the hold outlasts them however loaded the machine.
	srv, cl := streamServer(t, time.Hour, func(s *stream) {
		s.send(event{Type: evInit, Text: text("c1")})
		time.Sleep(10 * time.Millisecond)
		s.send(event{Type: evCount, ExecutionCount: 1})
		time.Sleep(10 * time.Millisecond)
		s.send(event{Type: evComplete, ExecutionTime: millis(0)})
	})
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if n := strings.Count(body, `"type"`); n != 3 {
		t.Fatalf("%d events in %q", n, body)
	}
	if n := cl.writes.Load(); n != 1 {
		t.Errorf("the server wrote the stream in %d writes, want 1", n)
	}
}

// TestStreamOutputGoesAtOnce: output is not held for company: the client
// reads a line of stdout, and an init with nothing after it, while the
// work that sends them still runs.
func TestStreamOutputGoesAtOnce(t *testing.T) {
	t.Parallel()
	for _, first := range []event{
		{Type: evStdout, Text: text("line\n")},
		{Type: evInit, Text: text("c1")}, // held at most defaultHoldFor
	} {
		read := make(chan struct{})
		var late atomic.Bool
		srv, _ := streamServer(t, defaultHoldFor, func(s *stream) {
			s.send(first)
			select {
			case <-read:
			case <-time.After(30 * time.Second): // holdFor is far shorter
				late.Store(true)
			}
			s.send(event{Type: evComplete, ExecutionTime: millis(0)})
		})
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		close(read)
		resp.Body.Close()
		if err != nil || !strings.Contains(line, `"type":"`+first.Type+`"`) || late.Load() {
			t.Errorf("%s: read %q (%v) only once the work ended", first.Type, line, err)
		}
	}
}
