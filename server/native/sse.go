package native

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/session"
)

// An execution streams as server-sent events: stdout and stderr ({"text"}),
// display ({"kind","data"}: a rich result or a figure), then one result
// (the execution, as the JSON answer) or error ({"code","message"}).
// Each output event's id is the stream's cursor after it, "<stdout
// bytes>.<stderr bytes>.<displays>", so a client that reconnects with
// Last-Event-ID gets only what it missed, whether the execution still runs
// (from the events kept in memory) or has ended (from the recorded result,
// whose output is capped at MAX_OUTPUT_BYTES). The final event's id is
// "done"; resuming from it answers 204, which also stops a browser's
// EventSource from reconnecting.

// doneID is the id of the final event.
const doneID = "done"

// cursor counts what a client received of an execution's stream.
type cursor struct {
	out, err int // bytes of stdout and stderr
	n        int // display events
}

func (c cursor) String() string { return fmt.Sprintf("%d.%d.%d", c.out, c.err, c.n) }

func (c cursor) after(name, text string) cursor {
	switch name {
	case "stdout":
		c.out += len(text)
	case "stderr":
		c.err += len(text)
	default:
		c.n++
	}
	return c
}

// covers reports whether a client at c has received the event at d.
func (c cursor) covers(d cursor) bool { return d.out <= c.out && d.err <= c.err && d.n <= c.n }

func (c cursor) join(d cursor) cursor {
	return cursor{max(c.out, d.out), max(c.err, d.err), max(c.n, d.n)}
}

// parseCursor reads a Last-Event-ID: "" is the start, doneID the end.
func parseCursor(s string) (c cursor, done, ok bool) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return cursor{}, false, true
	case doneID:
		return cursor{}, true, true
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return cursor{}, false, false
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p != strconv.Itoa(n) {
			return cursor{}, false, false
		}
		v[i] = n
	}
	return cursor{v[0], v[1], v[2]}, false, true
}

// eventWriter writes server-sent events, sending the response's headers
// with the first one (so an execution that fails before any output still
// answers with an error status).
type eventWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (s *eventWriter) begin() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not hold events back
	s.w.WriteHeader(http.StatusOK)
}

func (s *eventWriter) send(id, name string, data []byte) error {
	s.begin()
	_ = s.rc.SetWriteDeadline(time.Now().Add(time.Minute)) // a slow reader, not a long stream, times out
	_, err := fmt.Fprintf(s.w, "id: %s\nevent: %s\ndata: %s\n\n", id, name, data)
	return err
}

func (s *eventWriter) ping() error {
	s.begin()
	_ = s.rc.SetWriteDeadline(time.Now().Add(time.Minute))
	_, err := fmt.Fprint(s.w, ": ping\n\n")
	if err == nil {
		err = s.rc.Flush()
	}
	return err
}

// stream sends rn's events after from, following it until it ends, then
// the result. joined says this request did not start the execution.
func (h *handler) stream(w http.ResponseWriter, r *http.Request, c call, rn *run, from cursor, joined bool) {
	s := &eventWriter{w: w, rc: http.NewResponseController(w)}
	tick := time.NewTicker(h.opts.KeepAlive)
	defer tick.Stop()
	pos := 0
	for {
		evs, next, over, changed := rn.since(pos)
		pos = next
		for _, e := range evs {
			if from.covers(e.cur) {
				continue
			}
			if s.send(e.cur.String(), e.name, e.data) != nil {
				return
			}
			from = from.join(e.cur)
		}
		if len(evs) > 0 && s.rc.Flush() != nil {
			return
		}
		if over {
			break
		}
		select {
		case <-changed:
		case <-rn.done:
		case <-tick.C:
			if s.ping() != nil {
				return
			}
		case <-r.Context().Done():
			return // the execution runs on
		}
	}
	res, err := rn.result(joined)
	if err != nil {
		if !s.started {
			h.fail(w, r, c, err)
			return
		}
		_, body := failure(c, err)
		data, _ := json.Marshal(body)
		_ = s.send(doneID, "error", data)
		_ = s.rc.Flush()
		return
	}
	// What the client has not seen, from the recorded result: all of it
	// for a replay, nothing for a stream it followed whole.
	for _, e := range rest(res, from) {
		if s.send(e.cur.String(), e.name, e.data) != nil {
			return
		}
	}
	data, _ := json.Marshal(toExecution(c.name, res))
	_ = s.send(doneID, "result", data)
	_ = s.rc.Flush()
}

// rest is the output of res a client at from has not received, one event
// per stream. Output cut in its middle (MAX_OUTPUT_BYTES) is sent from
// what the result kept.
func rest(res *session.Result, from cursor) []event {
	var out []event
	cur := from
	for _, s := range []struct{ name, text string }{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
		at := cur.out
		if s.name == "stderr" {
			at = cur.err
		}
		if at >= len(s.text) {
			continue
		}
		text := s.text[at:]
		data, _ := json.Marshal(textEvent{Text: text})
		cur = cur.after(s.name, text)
		out = append(out, event{name: s.name, data: data, cur: cur})
	}
	for i := cur.n; i < len(res.Outputs); i++ {
		o := res.Outputs[i]
		data, _ := json.Marshal(displayEvent{Kind: o.Kind, Data: o.Data})
		cur = cur.after("display", "")
		out = append(out, event{name: "display", data: data, cur: cur})
	}
	return out
}
