package native

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// maxIDBytes bounds an execution id (an agent's tool-call id fits).
const maxIDBytes = 128

// validExecID accepts ids that read the same in a path segment and a log:
// letters, digits and . _ : -.
func validExecID(id string) bool {
	if id == "" || len(id) > maxIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:-", c) >= 0) {
			return false
		}
	}
	return true
}

func badRequest(w http.ResponseWriter, code, msg string) {
	writeJSONStatus(w, http.StatusBadRequest, apiError{Code: code, Message: msg})
}

func location(name, id string) string {
	return Prefix + "sessions/" + url.PathEscape(name) + "/executions/" + url.PathEscape(id)
}

// wantsEvents reports whether the client asked for server-sent events.
func wantsEvents(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
			return true
		}
	}
	return false
}

func (h *handler) postExecution(w http.ResponseWriter, r *http.Request, c call) {
	var req execRequest
	if !h.decode(w, r, &req, false) {
		return
	}
	if req.Code == "" {
		badRequest(w, "invalid_code", "code is required")
		return
	}
	if req.ID == "" {
		req.ID = kernel.NewID()
	} else if !validExecID(req.ID) {
		badRequest(w, "invalid_id", fmt.Sprintf("an execution id is 1 to %d letters, digits and . _ : -", maxIDBytes))
		return
	}
	var timeout time.Duration
	if t := req.TimeoutS; t != nil {
		if math.IsNaN(*t) || *t <= 0 || *t > h.opts.MaxTimeout.Seconds() {
			badRequest(w, "invalid_timeout", fmt.Sprintf("timeout_s is more than 0 and at most %g", h.opts.MaxTimeout.Seconds()))
			return
		}
		timeout = time.Duration(*t * float64(time.Second))
	}
	events := wantsEvents(r)
	var from cursor
	if events {
		var done, ok bool
		if from, done, ok = parseCursor(r.Header.Get("Last-Event-ID")); !ok {
			badRequest(w, "invalid_last_event_id", "Last-Event-ID is an event id this API sent")
			return
		}
		if done {
			w.WriteHeader(http.StatusNoContent) // the client has the whole stream
			return
		}
	}
	rn, joined := h.start(r.Context(), c, req.ID, req.Code, timeout)
	if joined && rn.sum != sha256.Sum256([]byte(req.Code)) {
		writeJSONStatus(w, http.StatusConflict, apiError{Code: "id_conflict",
			Message: fmt.Sprintf("execution %s of session %q is running other code", req.ID, c.name)})
		return
	}
	w.Header().Set("Location", location(c.name, req.ID))
	if events {
		h.stream(w, r, c, rn, from, joined)
		return
	}
	select {
	case <-rn.done:
	case <-r.Context().Done():
		return // the execution runs on; GET .../executions/{id} answers it
	}
	res, err := rn.result(joined)
	h.answer(w, r, c, res, err)
}

// answer writes an execution's outcome as JSON.
func (h *handler) answer(w http.ResponseWriter, r *http.Request, c call, res *session.Result, err error) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute))
	if err != nil {
		h.fail(w, r, c, err)
		return
	}
	writeJSON(w, toExecution(c.name, res))
}

func (h *handler) getExecution(w http.ResponseWriter, r *http.Request, c call) {
	id := r.PathValue("id")
	if !validExecID(id) {
		badRequest(w, "invalid_id", fmt.Sprintf("an execution id is 1 to %d letters, digits and . _ : -", maxIDBytes))
		return
	}
	events := wantsEvents(r)
	var from cursor
	if events {
		var done, ok bool
		if from, done, ok = parseCursor(r.Header.Get("Last-Event-ID")); !ok {
			badRequest(w, "invalid_last_event_id", "Last-Event-ID is an event id this API sent")
			return
		}
		if done {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	wait := false
	if v := r.URL.Query().Get("wait"); v != "" {
		switch v {
		case "true", "1":
			wait = true
		case "false", "0":
		default:
			badRequest(w, "invalid_wait", "wait is true or false")
			return
		}
	}
	rn := h.running(c.key, id)
	if rn == nil {
		// Not running here: the Manager has it (recorded, or running in
		// another process, which Fetch waits for) or nobody does.
		res, err := h.fetch(r.Context(), c.key, id)
		if r.Context().Err() != nil {
			return
		}
		if err != nil {
			h.fail(w, r, c, err)
			return
		}
		if events {
			rn = finished(res)
		} else {
			h.answer(w, r, c, res, nil)
			return
		}
	}
	if events {
		h.stream(w, r, c, rn, from, true)
		return
	}
	if !wait {
		select {
		case <-rn.done:
		default:
			w.Header().Set("Location", location(c.name, id))
			w.Header().Set("Retry-After", "1")
			writeJSONStatus(w, http.StatusAccepted, pending{ID: id, Session: c.name, Status: statusRunning})
			return
		}
	}
	select {
	case <-rn.done:
	case <-r.Context().Done():
		return
	}
	res, err := rn.result(true)
	h.answer(w, r, c, res, err)
}

// fetch is Manager.Fetch on a context the client cannot cancel: ending a
// fetch's context interrupts the code it waits for, and a client that gives
// up waiting must not stop the execution. It returns when the client goes.
func (h *handler) fetch(ctx context.Context, key, id string) (*session.Result, error) {
	type outcome struct {
		res *session.Result
		err error
	}
	ch := make(chan outcome, 1)
	go func() {
		res, err := h.m.Fetch(context.WithoutCancel(ctx), key, id)
		ch <- outcome{res, err}
	}()
	select {
	case o := <-ch:
		return o.res, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
