package execd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// TokenHeader carries the per-sandbox access token.
const TokenHeader = "X-EXECD-ACCESS-TOKEN"

// CursorHeader carries the next cursor of a background command's logs.
const CursorHeader = "EXECD-COMMANDS-TAIL-CURSOR"

// Defaults of Options.
const (
	DefaultPrefix       = "/execd/"
	DefaultMaxBodyBytes = 16 << 20
	DefaultPingInterval = 3 * time.Second
	DefaultFileOwner    = "sandbox"
)

// Options configure the handler. The zero value works, with the defaults
// above; Tokens must be set for any request to pass.
type Options struct {
	// Tokens checks the X-EXECD-ACCESS-TOKEN of every request. The zero
	// Tokens accepts none.
	Tokens tenant.Tokens
	// Keys are the API keys the server serves now: a token opens nothing
	// once its tenant's key is gone (Keys.Serves). Nil or empty: a
	// keyless server, where only tenant.Local's tokens open anything.
	Keys *tenant.Keys
	// Log receives what goes wrong on the server's side (5xx answers,
	// broken streams); nil discards. Tokens are never logged.
	Log *slog.Logger
	// MaxBodyBytes caps JSON request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxUploadBytes caps a multipart upload request; 0 leaves it to the
	// Manager's own caps (FILES_MAX_FILE_MB, FILES_MAX_CALL_MB).
	MaxUploadBytes int64
	// Prefix is where the handler is mounted, with a slash at both ends;
	// default DefaultPrefix.
	Prefix string
	// PingInterval is how often a ping event goes out on a running stream;
	// default DefaultPingInterval.
	PingInterval time.Duration
	// FileOwner is the owner and group reported for sandbox files (the
	// sandbox user's name); default DefaultFileOwner.
	FileOwner string
	// Now is the clock of event timestamps; default time.Now.
	Now func() time.Time
}

// Handler serves the execd API of every sandbox under Options.Prefix.
type Handler struct {
	m    *session.Manager
	opts Options
	log  *slog.Logger

	fg       *foreground
	contexts *contexts
	newID    func() string
	holdFor  time.Duration // see stream
}

// NewHandler returns the execd API over m.
func NewHandler(m *session.Manager, opts Options) http.Handler {
	return newHandler(m, opts)
}

func newHandler(m *session.Manager, opts Options) *Handler {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(opts.Prefix, "/") {
		opts.Prefix += "/"
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.FileOwner == "" {
		opts.FileOwner = DefaultFileOwner
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{m: m, opts: opts, log: log, fg: newForeground(), contexts: newContexts(), newID: randomID, holdFor: defaultHoldFor}
}

// randomID is a fresh id for a command or a context.
func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// call is one request on one sandbox.
type call struct {
	w     http.ResponseWriter
	r     *http.Request
	id    string // the sandbox id
	key   string // its session key
	route string // the execd route, from "/"
	state session.Status
}

// route is one execd route's handler.
type routeFunc func(h *Handler, c *call) error

// routes maps "METHOD /route" to its handler; routes with an id in their
// path are matched in match.
var routes = map[string]routeFunc{
	"GET /ping":                  (*Handler).ping,
	"GET /metrics":               (*Handler).metrics,
	"POST /command":              (*Handler).runCommand,
	"DELETE /command":            (*Handler).interruptCommand,
	"POST /code/context":         (*Handler).createContext,
	"GET /code/contexts":         (*Handler).listContexts,
	"DELETE /code/contexts":      (*Handler).deleteContexts,
	"POST /code":                 (*Handler).runCode,
	"DELETE /code":               (*Handler).interruptCode,
	"POST /files/upload":         (*Handler).upload,
	"GET /files/download":        (*Handler).download,
	"GET /files/info":            (*Handler).filesInfo,
	"DELETE /files":              (*Handler).removeFiles,
	"GET /files/search":          (*Handler).search,
	"POST /files/mv":             (*Handler).move,
	"POST /files/permissions":    (*Handler).notSupported,
	"POST /files/replace":        (*Handler).notSupported,
	"GET /directories/list":      (*Handler).listDir,
	"POST /directories":          (*Handler).makeDirs,
	"DELETE /directories":        (*Handler).removeDirs,
	"POST /session":              (*Handler).notSupported,
	"DELETE /session":            (*Handler).notSupported,
	"GET /metrics/watch":         (*Handler).notSupported,
	"GET /command/status/{id}":   (*Handler).commandStatus,
	"GET /command/{id}/logs":     (*Handler).commandLogs,
	"GET /code/contexts/{id}":    (*Handler).getContext,
	"DELETE /code/contexts/{id}": (*Handler).deleteContext,
}

// pattern returns the route pattern of path and its {id} element.
func pattern(path string) (string, string) {
	el := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case len(el) == 3 && el[0] == "command" && el[1] == "status" && el[2] != "":
		return "/command/status/{id}", el[2]
	case len(el) == 3 && el[0] == "command" && el[2] == "logs" && el[1] != "":
		return "/command/{id}/logs", el[1]
	case len(el) == 3 && el[0] == "code" && el[1] == "contexts" && el[2] != "":
		return "/code/contexts/{id}", el[2]
	case el[0] == "session":
		return "/session", "" // bash sessions: not offered
	}
	return path, ""
}

// ServeHTTP checks the token and the sandbox, then runs the route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := r.Header.Get("X-Request-ID")
	if reqID == "" || len(reqID) > 128 {
		reqID = randomID()
	}
	w.Header().Set("X-Request-ID", reqID)

	rest, ok := strings.CutPrefix(r.URL.Path, h.opts.Prefix)
	id, route, _ := strings.Cut(rest, "/")
	if !ok || id == "" {
		writeError(w, errorf(http.StatusNotFound, codeNotFound, "no such route: %s", r.URL.Path))
		return
	}
	route = "/" + route
	pat, param := pattern(route)
	fn, known := routes[r.Method+" "+pat]
	if !known {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			if _, other := routes[m+" "+pat]; other {
				w.Header().Set("Allow", m)
				writeError(w, errorf(http.StatusMethodNotAllowed, codeMethod, "%s is not allowed on %s", r.Method, pat))
				return
			}
		}
		writeError(w, errorf(http.StatusNotFound, codeNotFound, "no such execd route: %s", route))
		return
	}

	claims, refusal := h.authenticate(r, id)
	if refusal != nil {
		refuse(w, refusal)
		return
	}
	c := &call{w: w, r: r, id: id, key: claims.Tenant.SessionKey(id), route: route}
	// Info neither creates nor resumes a session: every route below may
	// call what would create one, so an unknown or stopped sandbox stops
	// here.
	// Status, not Info: an open session answers without the engine,
	// whose inspection cost more than a call (/metrics asks Info).
	var err error
	c.state, err = h.m.Status(r.Context(), c.key)
	if err == nil && (c.state.State == session.StateStopped || c.state.State == session.StateLost) {
		err = errorf(http.StatusNotFound, codeSandboxNotFound, "sandbox %s is %s", id, c.state.State)
	}
	if errors.Is(err, session.ErrNotFound) {
		err = errorf(http.StatusNotFound, codeSandboxNotFound, "sandbox %s not found", id)
	}
	// The container id names this incarnation of the sandbox: one deleted
	// and created again under the same name has another.
	if err == nil && !claims.Opens(c.state.ContainerID) {
		refuse(w, errorf(http.StatusUnauthorized, codeSandboxRecreated,
			"sandbox %s was deleted and created again since this access token was issued: ask for its endpoint again (GET /v1/sandboxes/%s/endpoints/{port}) for a token of the new one", id, id))
		return
	}
	// A paused sandbox runs nothing: every route says so before it
	// begins (a stream's 200 with an error event would read as a failed
	// command to retry logic), the not-offered ones too, so a client
	// learns the one thing that helps first. /metrics alone answers: the
	// engine reads it, the frozen sandbox does nothing for it.
	// A sandbox paused by its idle timeout (IDLE_ACTION=pause) is not: its
	// next call resumes it.
	if err == nil && c.state.State == session.StatePaused && c.state.PausedBy != session.PausedByIdle && pat != "/metrics" {
		err = pausedErr(id)
	}
	if err == nil {
		if param != "" {
			c.r = r.WithContext(context.WithValue(r.Context(), paramKey{}, param))
		}
		err = fn(h, c)
	}
	if err != nil {
		h.fail(c, err)
	}
}

type paramKey struct{}

// param is the {id} element of a route.
func (c *call) param() string {
	s, _ := c.r.Context().Value(paramKey{}).(string)
	return s
}

// fail answers with err unless the answer began already (a stream).
func (h *Handler) fail(c *call, err error) {
	e := publicErr(c, err)
	if e.Status >= 500 {
		h.log.Error("execd request failed", "sandbox", c.id, "route", c.route, "status", e.Status, "err", err)
	}
	writeError(c.w, e)
}

// decode reads a JSON body into v, capped at MaxBodyBytes.
func (h *Handler) decode(c *call, v any) error {
	body := http.MaxBytesReader(c.w, c.r.Body, h.opts.MaxBodyBytes)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "error parsing request: empty body")
		}
		return errorf(http.StatusBadRequest, codeInvalidRequest, "error parsing request, invalid JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return errorf(http.StatusBadRequest, codeInvalidRequest, "error parsing request: more than one JSON value in the body")
	}
	return nil
}

// writeJSON answers 200 with v.
func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	return json.NewEncoder(w).Encode(v)
}

func (h *Handler) ping(c *call) error {
	c.w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Handler) notSupported(c *call) error {
	return errorf(http.StatusNotImplemented, codeNotSupported, "%s %s is not supported by agentbox", c.r.Method, c.route)
}

// metrics reports the sandbox's limits and memory in use. agentbox does
// not sample CPU use: cpu_used_pct is 0.
func (h *Handler) metrics(c *call) error {
	info, err := h.m.Info(c.r.Context(), c.key)
	if err != nil {
		return err
	}
	out := struct {
		CPUCount    float64 `json:"cpu_count"`
		CPUUsedPct  float64 `json:"cpu_used_pct"`
		MemTotalMiB float64 `json:"mem_total_mib"`
		MemUsedMiB  float64 `json:"mem_used_mib"`
		Timestamp   int64   `json:"timestamp"`
	}{
		MemUsedMiB: float64(info.MemoryBytes) / (1 << 20),
		Timestamp:  h.opts.Now().UnixMilli(),
	}
	if l := info.Limits; l != nil {
		out.CPUCount = l.CPUs
		out.MemTotalMiB = float64(l.MemoryMB)
	}
	return writeJSON(c.w, out)
}
