package execd

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"
)

// Event types of a stream, as OpenSandbox's SDK dispatches them.
const (
	evInit     = "init"
	evStdout   = "stdout"
	evStderr   = "stderr"
	evResult   = "result"
	evError    = "error"
	evComplete = "execution_complete"
	evCount    = "execution_count"
	evPing     = "ping"
)

// event is one element of a stream (OpenSandbox's ServerStreamEvent).
// Timestamp is always set: the SDK drops an event without one.
type event struct {
	Type           string         `json:"type"`
	Text           *string        `json:"text,omitempty"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	ExecutionTime  *int64         `json:"execution_time,omitempty"`
	Timestamp      int64          `json:"timestamp"`
	Results        map[string]any `json:"results,omitempty"`
	Error          *eventError    `json:"error,omitempty"`
}

// eventError is an error event's body.
type eventError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

func text(s string) *string { return &s }

func millis(d time.Duration) *int64 {
	ms := d.Milliseconds()
	return &ms
}

// maxQueued bounds the output waiting for a slow client: past it, stdout
// and stderr events are dropped (and counted in a note) rather than held
// in memory or allowed to stall the kernel's reader.
const maxQueued = 16 << 20

// stream writes events to a client as they are produced: each is encoded
// at once and queued, and one goroutine writes and flushes the queue, so a
// producer (the kernel connection's reader, a command's output) never
// waits on the network.
//
// Output (stdout, stderr, results, pings) goes out at once. The events
// that open and end a stream (init, the execution count, an error, the
// completion) wait up to holdFor for the next one, and those that end it
// go with the end of the response: a short execution or command is then
// one write to the client, headers and end included, where one write per
// event cost the server (and the client) a system call and a wakeup each:
// most of what serving a `pass` costs over the library.
type stream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	now func() time.Time
	log *slog.Logger

	mu      sync.Mutex
	queue   [][]byte
	queued  int
	dropped int
	closed  bool
	held    bool          // a quiet event waits in queue; hold runs
	holdFor time.Duration // how long a quiet event waits (Handler.holdFor)
	hold    *time.Timer   // wakes the writer holdFor after a quiet event
	wake    chan struct{}
	done    chan struct{}
}

// defaultHoldFor is how long a quiet event (see stream) waits for company: short
// enough that a client never notices an init late, long enough to take
// in a command's or a `pass`'s whole run.
const defaultHoldFor = 20 * time.Millisecond

// startStream answers 200 with an event stream and pings every interval
// until close. The headers go with the first events.
func (h *Handler) startStream(c *call) *stream {
	hd := c.w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(http.StatusOK)
	s := &stream{
		w: c.w, rc: http.NewResponseController(c.w), now: h.opts.Now, log: h.log,
		wake: make(chan struct{}, 1), done: make(chan struct{}), holdFor: h.holdFor,
	}
	s.hold = time.AfterFunc(time.Hour, s.wakeUp)
	s.hold.Stop()
	go s.writer(c.r.Context(), h.opts.PingInterval)
	return s
}

// send stamps ev and queues it.
func (s *stream) send(ev event) {
	ev.Timestamp = s.now().UnixMilli()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		s.log.Error("execd: encode event", "type", ev.Type, "err", err)
		return
	}
	b.WriteByte('\n') // Encode ended the line: a blank line ends the event
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.queued+b.Len() > maxQueued && (ev.Type == evStdout || ev.Type == evStderr) {
		s.dropped += len(*ev.Text)
		return
	}
	if s.dropped > 0 && s.queued+b.Len() <= maxQueued/2 {
		note := event{Type: evStderr, Timestamp: ev.Timestamp,
			Text: text("[agentbox: " + itoa(s.dropped) + " bytes of output dropped: the client read too slowly]")}
		nb, _ := json.Marshal(note)
		s.push(append(nb, '\n', '\n'), false)
		s.dropped = 0
	}
	s.push(b.Bytes(), quiet(ev.Type))
}

// quiet says whether an event of type t may wait for the next (see stream).
func quiet(t string) bool {
	switch t {
	case evInit, evCount, evError, evComplete:
		return true
	}
	return false
}

func (s *stream) push(b []byte, quiet bool) {
	s.queue = append(s.queue, b)
	s.queued += len(b)
	switch {
	case !quiet:
		s.wakeUp()
	case !s.held:
		s.held = true
		s.hold.Reset(s.holdFor)
	}
}

func (s *stream) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// writer writes and flushes queued events until close drains it, and
// pings every interval until the request ends. What close leaves is
// written unflushed: the handler's return sends it with the response's
// end. After a write error (the client left) it discards the rest.
func (s *stream) writer(ctx context.Context, every time.Duration) {
	defer close(s.done)
	ping := time.NewTicker(every)
	defer ping.Stop()
	pings, ended := ping.C, ctx.Done()
	broken := false
	for {
		select {
		case <-s.wake:
		case <-pings:
			s.send(event{Type: evPing, Text: text("pong")})
			continue // send woke the writer
		case <-ended:
			pings, ended = nil, nil
			continue
		}
		s.mu.Lock()
		batch, closed := s.queue, s.closed
		s.queue, s.queued = nil, 0
		if s.held {
			s.held = false
			s.hold.Stop()
		}
		s.mu.Unlock()
		for _, b := range batch {
			if broken {
				break
			}
			if _, err := s.w.Write(b); err != nil {
				broken = true
			}
		}
		if closed {
			return
		}
		if len(batch) > 0 && !broken {
			if err := s.rc.Flush(); err != nil {
				broken = true
			}
		}
	}
}

// close waits until every queued event is written; it stops the pings.
func (s *stream) close() {
	s.mu.Lock()
	s.closed = true
	s.wakeUp()
	s.mu.Unlock()
	<-s.done
	s.hold.Stop()
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// maxLine is the longest line held back waiting for its end; a longer
// one goes out in pieces of this size.
const maxLine = 64 << 10

// lines cuts output into one event per line. For commands (keep false) a
// line goes without its terminator, and \r, \n and \r\n all end one, as
// OpenSandbox's execd splits them; for Python (keep true) a line keeps
// its "\n", as Jupyter streams it. What is left without an end goes out
// at flush.
type lines struct {
	mu     sync.Mutex
	keep   bool
	buf    []byte
	lastCR bool
	emit   func(string)
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		if l.lastCR && !l.keep && p[0] == '\n' {
			l.lastCR = false
			p = p[1:]
			continue
		}
		l.lastCR = false
		i := bytes.IndexByte(p, '\n')
		if !l.keep {
			if j := bytes.IndexByte(p, '\r'); j >= 0 && (i < 0 || j < i) {
				i = j
			}
		}
		if i < 0 {
			l.buf = append(l.buf, p...)
			l.spill()
			break
		}
		end := i
		if l.keep {
			end = i + 1
		}
		l.buf = append(l.buf, p[:end]...)
		l.spill()
		l.emit(string(l.buf))
		l.buf = l.buf[:0]
		l.lastCR = p[i] == '\r'
		p = p[i+1:]
	}
	return n, nil
}

// spill emits a line longer than maxLine in pieces, cut between runes.
func (l *lines) spill() {
	for len(l.buf) > maxLine {
		cut := maxLine
		for cut > maxLine-utf8.UTFMax && !utf8.RuneStart(l.buf[cut]) {
			cut--
		}
		l.emit(string(l.buf[:cut]))
		l.buf = append(l.buf[:0], l.buf[cut:]...)
	}
}

// flush emits what is left of an unfinished line.
func (l *lines) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(string(l.buf))
		l.buf = l.buf[:0]
	}
}
