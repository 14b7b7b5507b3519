package sessiontest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// msg is one frame on the wire.
type msg map[string]any

// fakeKernel is the init and kernel of one container: state shared by every
// connection, executions run one at a time in order, results kept by id.
type fakeKernel struct {
	started   time.Time
	maxOutput int
	slot      chan struct{} // held by the running execution or inspect
	dead      chan struct{} // closed when the container stops

	connMu sync.Mutex // guards conns and stopped; taken before mu, never after
	conns  map[net.Conn]bool
	down   bool

	mu      sync.Mutex // guards the rest; held while frames of one execution are sent
	vars    map[string]value
	count   int
	execs   map[string]*execution
	current *execution
}

// execution is one piece of code, from accepted to its recorded result.
type execution struct {
	id, code    string
	timeout     float64 // seconds; 0 = none
	count       int
	begun       time.Time
	events      []msg // recorded for replay
	result      msg   // nil until it finished
	subs        []net.Conn
	stop        chan struct{} // closed by interrupt or timeout
	stopped     bool
	timedOut    bool
	interrupted bool
}

func newKernel(maxOutput int) *fakeKernel {
	return &fakeKernel{
		started:   time.Now(),
		maxOutput: maxOutput,
		slot:      make(chan struct{}, 1),
		dead:      make(chan struct{}),
		conns:     map[net.Conn]bool{},
		vars:      map[string]value{},
		execs:     map[string]*execution{},
	}
}

// stop ends the kernel: streams break, the running code never reports.
func (k *fakeKernel) stop() {
	k.connMu.Lock()
	if k.down {
		k.connMu.Unlock()
		return
	}
	k.down = true
	conns := k.conns
	k.conns = nil
	k.connMu.Unlock()
	close(k.dead)
	for c := range conns {
		c.Close() // unblocks a send in progress
	}
}

// serve speaks the protocol on conn until it closes; false if the kernel is
// already stopped.
func (k *fakeKernel) serve(conn net.Conn) bool {
	k.connMu.Lock()
	defer k.connMu.Unlock()
	if k.down {
		return false
	}
	k.conns[conn] = true
	go k.loop(conn)
	return true
}

func (k *fakeKernel) loop(conn net.Conn) {
	defer k.drop(conn)
	k.mu.Lock()
	hello := msg{
		"type": "hello", "protocol": kernel.ProtocolVersion, "init_pid": 1, "kernel_pid": 2,
		"python": "sessiontest", "restarts": 0, "execution_count": k.count, "busy": k.current != nil,
		"started": float64(k.started.UnixMilli()) / 1000, "max_output": k.maxOutput,
	}
	k.mu.Unlock()
	if send(conn, hello) != nil {
		return
	}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		if len(line) > 1 {
			k.handle(conn, line)
		}
	}
}

// drop forgets a closed connection.
func (k *fakeKernel) drop(conn net.Conn) {
	conn.Close()
	k.connMu.Lock()
	delete(k.conns, conn)
	k.connMu.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, ex := range k.execs {
		for i, c := range ex.subs {
			if c == conn {
				ex.subs = append(ex.subs[:i], ex.subs[i+1:]...)
				break
			}
		}
	}
}

// send writes one frame. A connection that fails is closed; its loop drops it.
func send(conn net.Conn, m msg) error {
	data, err := json.Marshal(m)
	if err != nil {
		panic(err) // frames are built here from plain values
	}
	if _, err := conn.Write(append(data, '\n')); err != nil {
		conn.Close()
		return err
	}
	return nil
}

type request struct {
	Type    string          `json:"type"`
	Req     string          `json:"req"`
	ID      string          `json:"id"`
	Code    json.RawMessage `json:"code"`
	Timeout float64         `json:"timeout"`
}

func (k *fakeKernel) handle(conn net.Conn, line []byte) {
	var r request
	if err := json.Unmarshal(line, &r); err != nil {
		send(conn, msg{"type": "error", "code": "bad_request", "message": "request is not a JSON object: " + err.Error()})
		return
	}
	switch r.Type {
	case "execute":
		k.execute(conn, r)
	case "get":
		k.mu.Lock()
		defer k.mu.Unlock()
		ex := k.execs[r.ID]
		if ex == nil {
			send(conn, msg{"type": "error", "req": r.Req, "id": r.ID, "code": "unknown_execution",
				"message": fmt.Sprintf("no execution with id '%s' is known to this kernel (it never ran here, or its result was dropped to make room)", r.ID)})
			return
		}
		ex.subscribe(conn)
	case "interrupt":
		k.mu.Lock()
		defer k.mu.Unlock()
		if ex := k.current; ex != nil && (r.ID == "" || r.ID == ex.id) {
			ex.halt(false)
		} else if ex := k.execs[r.ID]; ex != nil && ex.result == nil {
			ex.halt(false) // still queued: it finishes without running
		}
	case "inspect":
		go k.inspect(conn, r.Req)
	case "ping":
		send(conn, msg{"type": "pong", "req": r.Req})
	default:
		send(conn, msg{"type": "error", "req": r.Req, "code": "bad_request", "message": fmt.Sprintf("unknown request type '%s'", r.Type)})
	}
}

func (k *fakeKernel) execute(conn net.Conn, r request) {
	var code string
	if json.Unmarshal(r.Code, &code) != nil {
		send(conn, msg{"type": "error", "req": r.Req, "id": r.ID, "code": "bad_request", "message": `execute needs a string field "code"`})
		return
	}
	if r.ID == "" {
		r.ID = kernel.NewID()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if ex := k.execs[r.ID]; ex != nil {
		if ex.code != code {
			send(conn, msg{"type": "error", "req": r.Req, "id": r.ID, "code": "id_conflict",
				"message": fmt.Sprintf("execution id '%s' was already used for different code", r.ID)})
			return
		}
		send(conn, msg{"type": "accepted", "req": r.Req, "id": r.ID, "duplicate": true})
		ex.subscribe(conn)
		return
	}
	queued := 0
	for _, ex := range k.execs {
		if ex.result == nil {
			queued++
		}
	}
	ex := &execution{id: r.ID, code: code, timeout: r.Timeout, subs: []net.Conn{conn}, stop: make(chan struct{})}
	k.execs[r.ID] = ex
	send(conn, msg{"type": "accepted", "req": r.Req, "id": r.ID, "duplicate": false, "queued": queued})
	go k.run(ex)
}

// run waits for the execution's turn, runs it and reports its result.
func (k *fakeKernel) run(ex *execution) {
	select {
	case k.slot <- struct{}{}:
		defer func() { <-k.slot }()
	case <-ex.stop:
	case <-k.dead:
		return
	}
	k.mu.Lock()
	ex.begun = time.Now()
	if ex.stopped {
		// Interrupted while queued: it never runs and takes no count.
		k.finish(ex, &kernel.Exception{Name: "KeyboardInterrupt", Value: "interrupted before it started", Traceback: []string{}})
		k.mu.Unlock()
		return
	}
	k.count++
	ex.count = k.count
	k.current = ex
	k.publish(ex, msg{"type": "started", "id": ex.id, "execution_count": ex.count})
	k.mu.Unlock()
	var timer *time.Timer
	if ex.timeout > 0 {
		timer = time.AfterFunc(time.Duration(ex.timeout*float64(time.Second)), func() {
			k.mu.Lock()
			ex.halt(true)
			k.mu.Unlock()
		})
	}
	exc := k.interpret(ex)
	if timer != nil {
		timer.Stop()
	}
	select {
	case <-k.dead:
		return // the container stopped: nobody hears the result
	default:
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.current = nil
	k.finish(ex, exc)
}

// halt stops an execution with KeyboardInterrupt; k.mu is held.
func (ex *execution) halt(timedOut bool) {
	if ex.stopped || ex.result != nil {
		return
	}
	ex.stopped = true
	if timedOut {
		ex.timedOut = true
	} else {
		ex.interrupted = true
	}
	close(ex.stop)
}

// publish records a frame of ex and sends it to its subscribers; k.mu is held.
func (k *fakeKernel) publish(ex *execution, m msg) {
	if n := len(ex.events); n > 0 && m["type"] == "stream" && ex.events[n-1]["type"] == "stream" && ex.events[n-1]["name"] == m["name"] {
		// Consecutive chunks of one stream are kept as one, like the init.
		last := ex.events[n-1]
		ex.events[n-1] = msg{"type": "stream", "id": ex.id, "name": last["name"], "text": last["text"].(string) + m["text"].(string)}
	} else {
		ex.events = append(ex.events, m)
	}
	for _, c := range ex.subs {
		send(c, m)
	}
}

// finish records and sends the result of ex; k.mu is held.
func (k *fakeKernel) finish(ex *execution, exc *kernel.Exception) {
	status := "ok"
	if exc != nil {
		status = "error"
	}
	ex.result = msg{
		"type": "result", "id": ex.id, "execution_count": ex.count, "status": status, "error": exc,
		"timed_out": ex.timedOut, "interrupted": ex.interrupted, "kernel_restarted": false,
		"state_lost": false, "restart_reason": nil, "truncated": map[string]int64{},
		"duration_ms": float64(time.Since(ex.begun).Microseconds()) / 1000,
	}
	for _, c := range ex.subs {
		send(c, ex.result)
	}
	ex.subs = nil
}

// subscribe replays what ex produced so far to conn and, if it still runs,
// sends it the rest as it comes; k.mu is held.
func (ex *execution) subscribe(conn net.Conn) {
	for _, m := range ex.events {
		if send(conn, m) != nil {
			return
		}
	}
	if ex.result != nil {
		replayed := msg{"replayed": true}
		for key, v := range ex.result {
			replayed[key] = v
		}
		send(conn, replayed)
		return
	}
	ex.subs = append(ex.subs, conn)
}

// inspect answers with the namespace once no execution runs.
func (k *fakeKernel) inspect(conn net.Conn, req string) {
	select {
	case k.slot <- struct{}{}:
		defer func() { <-k.slot }()
	case <-k.dead:
		return
	}
	k.mu.Lock()
	vars := make([]kernel.Variable, 0, len(k.vars))
	for _, name := range sortedKeys(k.vars) {
		v := k.vars[name]
		vars = append(vars, kernel.Variable{Name: name, Type: v.typ(), Repr: v.repr()})
	}
	k.mu.Unlock()
	send(conn, msg{"type": "state", "req": req, "variables": vars, "modules": []kernel.Module{}})
}
