package native

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// apiError is every error's body: a stable code for programs, a message
// for people.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// classify maps a Manager error to its status and code. Order matters:
// an outcome-unknown error also wraps the session's loss.
func classify(err error) (int, string) {
	switch {
	case errors.Is(err, session.ErrQuota):
		return http.StatusTooManyRequests, "quota_exceeded"
	case errors.Is(err, kernel.ErrIDConflict):
		return http.StatusConflict, "id_conflict"
	case errors.Is(err, session.ErrOutcomeUnknown):
		return http.StatusGone, "outcome_unknown"
	case errors.Is(err, session.ErrUnknownExecution):
		return http.StatusNotFound, "execution_not_found"
	case errors.Is(err, session.ErrNotFound):
		return http.StatusNotFound, "session_not_found"
	case errors.Is(err, session.ErrInvalidKey):
		return http.StatusBadRequest, "invalid_session"
	case errors.Is(err, session.ErrExpired):
		return http.StatusGone, "session_expired"
	case errors.Is(err, session.ErrSessionLost):
		return http.StatusGone, "session_lost"
	case errors.Is(err, session.ErrPaused):
		return http.StatusConflict, "session_paused"
	case errors.Is(err, session.ErrBusy):
		return http.StatusConflict, "session_busy"
	case errors.Is(err, session.ErrNoDatasetSource):
		return http.StatusConflict, "no_dataset_source"
	case errors.Is(err, session.ErrInvalidOption), errors.Is(err, session.ErrAboveMaximum),
		errors.Is(err, session.ErrImageNotAllowed):
		return http.StatusBadRequest, "invalid_option"
	case errors.Is(err, session.ErrNoSpace):
		// A full disk (a session's, or the host's past its reserve) is
		// the storage's state, not the server's fault.
		return http.StatusInsufficientStorage, "no_space"
	case errors.Is(err, session.ErrClosed), errors.Is(err, session.ErrUnavailable),
		errors.Is(err, session.ErrImageMissing), errors.Is(err, session.ErrImageStale):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout"
	case errors.Is(err, session.ErrStorageFull):
		return http.StatusInsufficientStorage, "storage_full"
	}
	return http.StatusInternalServerError, "internal"
}

// failure is the body and status of a Manager error as c sees it: the
// message names the caller's session, not the tenant's key.
func failure(c call, err error) (int, apiError) {
	status, code := classify(err)
	// The server's own failures may name its files (ARTIFACTS_DB, the
	// engine's socket): their causes go to the log, not to the tenant.
	switch code {
	case "storage_full":
		return status, apiError{Code: code, Message: "the server's disk is full: the operator must make room; try again later"}
	case "unavailable":
		if !errors.Is(err, session.ErrImageMissing) && !errors.Is(err, session.ErrImageStale) {
			return status, apiError{Code: code, Message: "the sandbox engine is unavailable (or the server is shutting down); try again later"}
		}
	case "internal":
		return status, apiError{Code: code, Message: "internal error; the server log has the cause"}
	}
	msg := err.Error()
	if c.key != "" {
		msg = strings.ReplaceAll(msg, fmt.Sprintf("%q", c.key), fmt.Sprintf("%q", c.name))
		msg = strings.ReplaceAll(msg, c.key, c.name)
	}
	return status, apiError{Code: code, Message: msg}
}

// fail writes a Manager error; server errors are logged with the request.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, c call, err error) {
	status, body := failure(c, err)
	if status >= 500 {
		h.log.Warn("native API", "method", r.Method, "path", r.URL.Path,
			"request_id", w.Header().Get("X-Request-ID"), "status", status, "err", err)
	}
	writeJSONStatus(w, status, body)
}

func notFound(c call) apiError {
	return apiError{Code: "session_not_found", Message: fmt.Sprintf("no session %q", c.name)}
}

func byteCount(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
