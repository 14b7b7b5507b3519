package native

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// A run is an execution this handler started and that has not ended: its
// events so far (for clients that join or resume its stream), and then its
// outcome. Once the Manager's Exec returns, the result is in the history,
// and the run is dropped from the registry.

type runKey struct{ key, id string }

type run struct {
	sum     [sha256.Size]byte // of the code: a join with other code is a conflict
	max     int               // bytes of events kept
	done    chan struct{}     // closed when res or err is set
	onStart func()            // called once, when the kernel starts the code

	mu      sync.Mutex
	events  []event
	dropped int // events dropped from the front to stay under max
	size    int
	cur     cursor
	started bool
	seen    cursor        // events seen since the last start: a reconnected stream replays them
	changed chan struct{} // closed and replaced when an event comes
	res     *session.Result
	err     error
}

// event is one server-sent event of an execution; cur is the stream's
// cursor after it, which is its id.
type event struct {
	name string
	data []byte
	cur  cursor
}

// start starts the execution id of c's session, or joins it when this
// handler is running it already (joined). A run is registered, for others
// to join and for GET to answer 202, once the kernel says it started the
// code: a request that turns out to replay a recorded result, or to reuse
// the id for other code, never stands for the id.
func (h *handler) start(ctx context.Context, c call, id, code string, timeout time.Duration) (rn *run, joined bool) {
	k := runKey{c.key, id}
	if rn := h.running(c.key, id); rn != nil {
		return rn, true
	}
	rn = &run{sum: sha256.Sum256([]byte(code)), max: h.opts.ReplayBytes, done: make(chan struct{}), changed: make(chan struct{})}
	rn.onStart = func() {
		h.mu.Lock()
		if h.runs[k] == nil {
			h.runs[k] = rn
		}
		h.mu.Unlock()
	}
	opts := []session.ExecOption{session.ExecID(id), session.OnEvent(rn.add)}
	if timeout > 0 {
		opts = append(opts, session.Timeout(timeout))
	}
	// Detached from the request: a client that goes away leaves the code
	// running, and its result is recorded for GET .../executions/{id}.
	// Until the code starts it is the request's: one whose client left
	// while it waited for the session's turn is dropped, never run.
	opts = append(opts, session.QueueContext(ctx))
	ctx = context.WithoutCancel(ctx)
	go func() {
		res, err := h.m.Exec(ctx, c.key, code, opts...)
		// Unregistered before done closes: whoever sees done and asks
		// again finds the result in the Manager's history.
		h.mu.Lock()
		if h.runs[k] == rn {
			delete(h.runs, k)
		}
		h.mu.Unlock()
		rn.finish(res, err)
	}()
	return rn, false
}

// running returns the run of id in the session of key, if this handler
// has one.
func (h *handler) running(key, id string) *run {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runs[runKey{key, id}]
}

// finished is a run that is over: a result fetched from the Manager.
func finished(res *session.Result) *run {
	rn := &run{done: make(chan struct{}), changed: make(chan struct{}), res: res}
	close(rn.done)
	return rn
}

// add records an event as the kernel streams it. It runs on the kernel
// connection's reader: it only appends. When the Manager reconnects to the
// kernel mid-run, the kernel replays the execution's events from its start:
// those already recorded are skipped.
func (rn *run) add(ev kernel.Event) {
	var e event
	switch ev.Type {
	case kernel.EventStarted:
		rn.mu.Lock()
		first := !rn.started
		rn.started = true
		rn.seen = cursor{}
		rn.mu.Unlock()
		if first && rn.onStart != nil {
			rn.onStart()
		}
		return
	case kernel.EventStream:
		if ev.Text == "" {
			return
		}
		e.name = "stdout"
		if ev.Name == "stderr" {
			e.name = "stderr"
		}
		e.data, _ = json.Marshal(textEvent{Text: ev.Text})
	case kernel.EventDisplay:
		e.name = "display"
		e.data, _ = json.Marshal(displayEvent{Kind: ev.Kind, Data: ev.Data})
	default:
		return
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.seen = rn.seen.after(e.name, ev.Text)
	if rn.cur.covers(rn.seen) {
		return // a replay of what came before the reconnection
	}
	rn.cur = rn.seen
	e.cur = rn.cur
	rn.events = append(rn.events, e)
	rn.size += len(e.data)
	for rn.size > rn.max && len(rn.events) > 1 {
		rn.size -= len(rn.events[0].data)
		rn.events[0] = event{}
		rn.events = rn.events[1:]
		rn.dropped++
	}
	close(rn.changed)
	rn.changed = make(chan struct{})
}

func (rn *run) finish(res *session.Result, err error) {
	rn.mu.Lock()
	rn.res, rn.err = res, err
	rn.mu.Unlock()
	close(rn.done)
}

// result is the run's outcome once done is closed. A caller that joined
// another's execution gets it flagged Replayed: its request ran nothing.
func (rn *run) result(joined bool) (*session.Result, error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.err != nil || !joined || rn.res.Replayed {
		return rn.res, rn.err
	}
	res := *rn.res
	res.Replayed = true
	return &res, nil
}

// since returns the events after index pos of the whole stream (moved up to
// the oldest one kept), the index after them, whether the run is over and
// the channel that says when more come.
func (rn *run) since(pos int) ([]event, int, bool, <-chan struct{}) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	pos = max(pos, rn.dropped)
	evs := append([]event(nil), rn.events[pos-rn.dropped:]...)
	over := rn.res != nil || rn.err != nil
	return evs, rn.dropped + len(rn.events), over, rn.changed
}

type textEvent struct {
	Text string `json:"text"`
}

type displayEvent struct {
	Kind string            `json:"kind"`
	Data map[string]string `json:"data"`
}
