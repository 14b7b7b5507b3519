package execd

import (
	"cmp"
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

const (
	languagePython = "python"
	// defaultContext is the context of code run without one: the SDK's
	// "default context per language".
	defaultContext = "python-default"
	// maxContexts bounds the context ids a sandbox may hold.
	maxContexts = 256
)

// codeContext is OpenSandbox's CodeContext.
type codeContext struct {
	ID       string `json:"id,omitempty"`
	Language string `json:"language"`
}

// language checks a requested language: Python only ("" means Python).
func language(l string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(l)) {
	case "", languagePython, "python3":
		return languagePython, nil
	}
	return "", errorf(http.StatusBadRequest, codeNotSupported, "language %q is not supported: agentbox runs python", l)
}

func (h *Handler) createContext(c *call) error {
	var q codeContext
	if err := h.decode(c, &q); err != nil {
		return err
	}
	lang, err := language(q.Language)
	if err != nil {
		return err
	}
	id := "py-" + h.newID()
	if !h.contexts.add(c.key, id) {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "too many code contexts in this sandbox (at most %d): delete some", maxContexts)
	}
	return writeJSON(c.w, codeContext{ID: id, Language: lang})
}

func (h *Handler) listContexts(c *call) error {
	out := []codeContext{}
	if _, err := language(c.r.URL.Query().Get("language")); err == nil {
		for _, id := range h.contexts.list(c.key) {
			out = append(out, codeContext{ID: id, Language: languagePython})
		}
	}
	return writeJSON(c.w, out)
}

func (h *Handler) getContext(c *call) error {
	id := c.param()
	if !h.contexts.has(c.key, id) {
		return errorf(http.StatusNotFound, codeContextNotFound, "context %s not found", id)
	}
	return writeJSON(c.w, codeContext{ID: id, Language: languagePython})
}

// deleteContext forgets a context id; the kernel, shared by every context
// of the sandbox, keeps its state.
func (h *Handler) deleteContext(c *call) error {
	id := c.param()
	if !h.contexts.remove(c.key, id) {
		return errorf(http.StatusNotFound, codeContextNotFound, "context %s not found", id)
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Handler) deleteContexts(c *call) error {
	l := c.r.URL.Query().Get("language")
	if l == "" {
		return errorf(http.StatusBadRequest, codeMissingQuery, "missing query parameter 'language'")
	}
	if _, err := language(l); err == nil {
		h.contexts.removeAll(c.key)
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

// runCodeRequest is OpenSandbox's RunCodeRequest.
type runCodeRequest struct {
	Context *codeContext `json:"context"`
	Code    string       `json:"code"`
}

// runCode runs Python in the sandbox's persistent kernel and streams what
// it prints and returns.
func (h *Handler) runCode(c *call) error {
	var q runCodeRequest
	if err := h.decode(c, &q); err != nil {
		return err
	}
	if strings.TrimSpace(q.Code) == "" {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "invalid request: code is empty")
	}
	ctxID := defaultContext
	if q.Context != nil {
		if _, err := language(q.Context.Language); err != nil {
			return err
		}
		if q.Context.ID != "" {
			ctxID = q.Context.ID
		}
	}
	// An id this handler does not know (a server restart forgot it) still
	// names the one kernel: run, and remember it again.
	if !h.contexts.add(c.key, ctxID) {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "too many code contexts in this sandbox (at most %d): delete some", maxContexts)
	}
	// Admitted before the stream starts: a tenant at its quota hears 429.
	admission, err := h.m.Admit(c.r.Context(), c.key)
	if err != nil {
		return err
	}
	defer admission.Release()
	ctx, cancel := context.WithCancel(c.r.Context())
	defer cancel()
	done := h.contexts.running(c.key, ctxID, cancel)
	defer done()

	start := time.Now()
	s := h.startStream(c)
	s.send(event{Type: evInit, Text: text(ctxID)})
	out := &lines{keep: true, emit: func(t string) { s.send(event{Type: evStdout, Text: text(t)}) }}
	errs := &lines{keep: true, emit: func(t string) { s.send(event{Type: evStderr, Text: text(t)}) }}
	// The count goes out once, before the trailing expression's result
	// (or at the end), as OpenSandbox's execd sends it; the kernel says
	// it when the code starts.
	counted, started := false, 0
	count := func(n int) {
		if !counted && n > 0 {
			counted = true
			s.send(event{Type: evCount, ExecutionCount: n})
		}
	}
	res, err := h.m.Exec(ctx, c.key, q.Code, session.Admitted(admission), session.OnEvent(func(ev kernel.Event) {
		switch ev.Type {
		case kernel.EventStarted:
			started = ev.ExecutionCount
		case kernel.EventStream:
			// A line held back on one stream goes out before the other
			// stream's output, so the order stays the code's.
			if ev.Name == "stderr" {
				out.flush()
				errs.Write([]byte(ev.Text))
			} else {
				errs.flush()
				out.Write([]byte(ev.Text))
			}
		case kernel.EventDisplay:
			out.flush()
			errs.flush()
			if ev.Kind == "execute_result" {
				count(cmp.Or(ev.ExecutionCount, started))
			}
			s.send(event{Type: evResult, Results: results(ev.Data)})
		}
	}))
	out.flush()
	errs.flush()
	switch {
	case err != nil:
		e := publicErr(c, err)
		if e.Status >= 500 {
			h.log.Error("execd code execution failed", "sandbox", c.id, "status", e.Status, "err", err)
		}
		s.send(event{Type: evError, Error: &eventError{Name: e.Code, Value: e.Message, Traceback: []string{}}})
	default:
		if res.StateLost || res.KernelRestarted {
			note := "[agentbox: the Python kernel restarted"
			if res.RestartReason != "" {
				note += " (" + res.RestartReason + ")"
			}
			if res.StateLost {
				note += "; variables and imports defined before are gone"
			}
			s.send(event{Type: evStderr, Text: text(note + "]\n")})
		}
		count(res.ExecutionCount)
		if res.Error != nil {
			tb := res.Error.Traceback
			if tb == nil {
				tb = []string{}
			}
			s.send(event{Type: evError, Error: &eventError{Name: res.Error.Name, Value: res.Error.Value, Traceback: tb}})
		} else {
			d := res.Duration
			if d <= 0 {
				d = time.Since(start)
			}
			s.send(event{Type: evComplete, ExecutionTime: millis(d)})
		}
	}
	s.close()
	return nil
}

// results is a MIME bundle as OpenSandbox sends it: text/plain is "text".
func results(data map[string]string) map[string]any {
	out := make(map[string]any, len(data))
	for k, v := range data {
		if k == "text/plain" {
			k = "text"
		}
		out[k] = v
	}
	return out
}

// interruptCode interrupts the code running in a context (KeyboardInterrupt
// in the kernel; what was defined before stays).
func (h *Handler) interruptCode(c *call) error {
	id := c.r.URL.Query().Get("id")
	if id == "" {
		return errorf(http.StatusBadRequest, codeMissingQuery, "missing query parameter 'id'")
	}
	if !h.contexts.interrupt(c.key, id) {
		return errorf(http.StatusNotFound, codeContextNotFound, "context %s not found", id)
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

// contexts holds the code context ids of each sandbox and the executions
// running in them.
type contexts struct {
	mu    sync.Mutex
	byKey map[string]map[string]*ctxState
	seq   int
}

type ctxState struct {
	created time.Time
	order   int
	running map[int]context.CancelFunc
}

func newContexts() *contexts { return &contexts{byKey: map[string]map[string]*ctxState{}} }

// add registers id (known ones are kept); false when the sandbox has too
// many.
func (cs *contexts) add(key, id string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	m := cs.byKey[key]
	if m == nil {
		m = map[string]*ctxState{}
		cs.byKey[key] = m
	}
	if m[id] != nil {
		return true
	}
	if len(m) >= maxContexts {
		return false
	}
	cs.seq++
	m[id] = &ctxState{created: time.Now(), order: cs.seq, running: map[int]context.CancelFunc{}}
	return true
}

func (cs *contexts) has(key, id string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.byKey[key][id] != nil
}

// list returns the sandbox's context ids in the order they were made.
func (cs *contexts) list(key string) []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	m := cs.byKey[key]
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return m[ids[i]].order < m[ids[j]].order })
	return ids
}

func (cs *contexts) remove(key, id string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byKey[key][id] == nil {
		return false
	}
	delete(cs.byKey[key], id)
	if len(cs.byKey[key]) == 0 {
		delete(cs.byKey, key)
	}
	return true
}

func (cs *contexts) removeAll(key string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.byKey, key)
}

// running records an execution of context id and returns what ends the
// record.
func (cs *contexts) running(key, id string, cancel context.CancelFunc) func() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st := cs.byKey[key][id]
	if st == nil {
		return func() {}
	}
	cs.seq++
	n := cs.seq
	st.running[n] = cancel
	return func() {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		delete(st.running, n)
	}
}

// interrupt cancels every execution running in context id; false when the
// context is unknown.
func (cs *contexts) interrupt(key, id string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st := cs.byKey[key][id]
	if st == nil {
		return false
	}
	for _, cancel := range st.running {
		cancel()
	}
	return true
}
