package opensandbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// Header names of the wire format.
const (
	// APIKeyHeader carries the caller's API key.
	APIKeyHeader = "OPEN-SANDBOX-API-KEY"
	// TokenHeader is the header the SDK sends to execd, as the endpoint's
	// headers say.
	TokenHeader = "X-EXECD-ACCESS-TOKEN"
	// RequestIDHeader is echoed on every response.
	RequestIDHeader = "X-Request-ID"
)

// DefaultMaxBodyBytes caps a request body when Options.MaxBodyBytes is 0:
// a create request with env and metadata is a few KiB.
const DefaultMaxBodyBytes = 1 << 20

// ExecdPrefix is the path under which the server mounts execd: an
// endpoint is <host>ExecdPrefix<id>.
const ExecdPrefix = "/execd/"

// Options configure NewHandler.
type Options struct {
	// Keys are the API keys, each a tenant. Nil or empty: no key is asked
	// for and every request is tenant.Local (the server allows that only
	// on loopback).
	Keys *tenant.Keys
	// Tokens issues the per-sandbox execd tokens endpoints carry; execd
	// must verify with the same secret.
	Tokens tenant.Tokens
	// Config is the Manager's configuration: the sandbox image and the
	// named ones (SANDBOX_IMAGE, SANDBOX_IMAGES) requests are mapped onto.
	Config config.Config
	// Log receives one line per failed request (5xx) and per refused API
	// key, never a key or a token. Nil: slog.Default's handler is not
	// used; nothing is logged.
	Log *slog.Logger
	// MaxBodyBytes caps a request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// EndpointHost is the host:port endpoints name; empty means the
	// request's Host, which is right unless a proxy rewrites it.
	EndpointHost string
}

// handler serves the routes; it keeps no state beyond its options.
type handler struct {
	m    *session.Manager
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
}

// NewHandler returns the lifecycle API over m. Mount it at the root of the
// server (its routes start with /v1/sandboxes and /v1/snapshots).
func NewHandler(m *session.Manager, opts Options) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{m: m, opts: opts, log: log, mux: http.NewServeMux()}
	// Methods are dispatched by hand so that a wrong one gets an
	// OpenSandbox-shaped 405, not the mux's plain text.
	h.route("/v1/sandboxes", map[string]http.HandlerFunc{"GET": h.list, "POST": h.create})
	h.route("/v1/sandboxes/{id}", map[string]http.HandlerFunc{"GET": h.get, "DELETE": h.delete})
	h.route("/v1/sandboxes/{id}/pause", map[string]http.HandlerFunc{"POST": h.pause})
	h.route("/v1/sandboxes/{id}/resume", map[string]http.HandlerFunc{"POST": h.resume})
	h.route("/v1/sandboxes/{id}/renew-expiration", map[string]http.HandlerFunc{"POST": h.renew})
	h.route("/v1/sandboxes/{id}/endpoints/{port}", map[string]http.HandlerFunc{"GET": h.endpoint})
	unsupported := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotImplemented, codeNotSupported, "agentbox does not support "+r.Method+" "+r.URL.Path+": it has no snapshots")
	}
	// Metadata is the container's labels, which the engine cannot change
	// on a running container.
	h.mux.HandleFunc("/v1/sandboxes/{id}/metadata", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotImplemented, codeNotSupported, "agentbox does not support "+r.Method+" "+r.URL.Path+" (the SDK's patch_metadata): a sandbox's metadata is fixed at create")
	})
	h.mux.HandleFunc("/v1/sandboxes/{id}/snapshots", unsupported)
	h.mux.HandleFunc("/v1/snapshots", unsupported)
	h.mux.HandleFunc("/v1/snapshots/", unsupported)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, codeNotFound, "no such route: "+r.Method+" "+r.URL.Path)
	})
	return h
}

func (h *handler) route(pattern string, methods map[string]http.HandlerFunc) {
	var allowed []string
	for m := range methods {
		allowed = append(allowed, m)
	}
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if f, ok := methods[r.Method]; ok {
			f(w, r)
			return
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
	})
}

// ServeHTTP sets the request id, caps the body, authenticates, then routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(RequestIDHeader, requestID(r))
	if r.ContentLength > h.opts.MaxBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge, tooLargeMessage(h.opts.MaxBodyBytes))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)
	t, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	h.mux.ServeHTTP(w, r.WithContext(tenant.With(r.Context(), t)))
}

// authenticate returns the request's tenant, or answers 401.
func (h *handler) authenticate(w http.ResponseWriter, r *http.Request) (tenant.Tenant, bool) {
	if h.opts.Keys == nil || h.opts.Keys.Len() == 0 {
		return tenant.Local, true
	}
	key := r.Header.Get(APIKeyHeader)
	if key == "" {
		writeError(w, http.StatusUnauthorized, codeMissingKey, "authentication credentials are missing: send the API key in the "+APIKeyHeader+" header")
		return tenant.Tenant{}, false
	}
	t, err := h.opts.Keys.Lookup(key)
	if err != nil {
		h.log.Warn("refused an unknown API key", "request_id", w.Header().Get(RequestIDHeader), "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, codeInvalidKey, "authentication credentials are invalid: check the API key")
		return tenant.Tenant{}, false
	}
	return t, true
}

// requestIDRE is what an echoed X-Request-ID may hold: printable, no
// spaces, short, so it cannot smuggle anything into logs or headers.
var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:/+=-]{1,128}$`)

// requestID returns the request's X-Request-ID when usable, else a new one
// (a UUID-shaped 32 hex digits, as OpenSandbox's server makes).
func requestID(r *http.Request) string {
	if id := strings.TrimSpace(r.Header.Get(RequestIDHeader)); requestIDRE.MatchString(id) {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Error codes, in the style of OpenSandbox's server ("SANDBOX::...";
// its auth middleware's own two without a prefix).
const (
	codeMissingKey       = "MISSING_API_KEY"
	codeInvalidKey       = "INVALID_API_KEY"
	codeInvalidParameter = "SANDBOX::INVALID_PARAMETER"
	codeInvalidJSON      = "SANDBOX::INVALID_REQUEST"
	codeTooLarge         = "SANDBOX::REQUEST_TOO_LARGE"
	codeNotFound         = "SANDBOX::NOT_FOUND"
	codeSandboxNotFound  = "SANDBOX::SANDBOX_NOT_FOUND"
	codeMethodNotAllowed = "SANDBOX::METHOD_NOT_ALLOWED"
	codeNotSupported     = "SANDBOX::API_NOT_SUPPORTED"
	codeInvalidExpiry    = "SANDBOX::INVALID_EXPIRATION"
	codeAboveMaximum     = "SANDBOX::ABOVE_MAXIMUM"
	codeImageNotAllowed  = "SANDBOX::IMAGE_NOT_ALLOWED"
	codeConflict         = "SANDBOX::STATE_CONFLICT"
	codeUnavailable      = "SANDBOX::UNAVAILABLE"
	codeNoSpace          = "SANDBOX::INSUFFICIENT_STORAGE"
	codeStorageFull      = "SANDBOX::STORAGE_FULL"
	codeInternal         = "SANDBOX::UNKNOWN_ERROR"
	codeQuota            = "SANDBOX::QUOTA_EXCEEDED" // agentbox's: a tenant quota (TENANT_MAX_*)
)

// errorBody is OpenSandbox's ErrorResponse.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, errorBody{Code: code, Message: message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func tooLargeMessage(limit int64) string {
	return "request body larger than " + formatBytes(limit)
}

// fail answers a Manager error with the status it means, logging only
// what is the server's fault.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, id string, err error) {
	var oe *session.OptionError
	var qe *session.QuotaError
	switch {
	case errors.As(err, &qe):
		writeError(w, http.StatusTooManyRequests, codeQuota, qe.Error())
	case errors.Is(err, session.ErrNotFound), errors.Is(err, session.ErrInvalidKey), errors.Is(err, session.ErrContainerNotFound):
		writeError(w, http.StatusNotFound, codeSandboxNotFound, "sandbox "+id+" not found")
	case errors.Is(err, session.ErrSessionLost):
		// Deleted by another call, or stopped at the engine, meanwhile.
		writeError(w, http.StatusConflict, codeConflict, "sandbox "+id+" is no longer running (being deleted, or its container stopped outside agentbox); delete it and create another")
	case errors.Is(err, session.ErrAboveMaximum):
		writeError(w, http.StatusBadRequest, codeAboveMaximum, optionMessage(err))
	case errors.Is(err, session.ErrImageNotAllowed):
		writeError(w, http.StatusBadRequest, codeImageNotAllowed, optionMessage(err))
	case errors.As(err, &oe), errors.Is(err, session.ErrInvalidOption):
		writeError(w, http.StatusBadRequest, codeInvalidParameter, optionMessage(err))
	case errors.Is(err, session.ErrPaused):
		writeError(w, http.StatusConflict, codeConflict, "sandbox "+id+" is paused: resume it first (POST /v1/sandboxes/"+id+"/resume)")
	case errors.Is(err, session.ErrBusy):
		writeError(w, http.StatusConflict, codeConflict, "sandbox "+id+" is running code in another process; try again when it ends")
	case errors.Is(err, session.ErrExpired):
		writeError(w, http.StatusConflict, codeInvalidExpiry, "sandbox "+id+" has expired and cannot be renewed")
	case errors.Is(err, session.ErrNoSpace):
		writeError(w, http.StatusInsufficientStorage, codeNoSpace, noSpaceMessage(err))
	case errors.Is(err, session.ErrUnavailable), errors.Is(err, session.ErrClosed):
		h.log.Error("sandbox engine unavailable", "request_id", w.Header().Get(RequestIDHeader), "sandbox_id", id, "err", err)
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the sandbox engine is unavailable; try again later")
	case errors.Is(err, session.ErrStorageFull):
		h.log.Error("server storage full", "request_id", w.Header().Get(RequestIDHeader), "sandbox_id", id, "err", err)
		writeError(w, http.StatusInsufficientStorage, codeStorageFull, "the server's disk is full: the operator must make room; try again later")
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		writeError(w, 499, codeInternal, "request canceled")
	default:
		h.log.Error("request failed", "request_id", w.Header().Get(RequestIDHeader), "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, "internal error (request "+w.Header().Get(RequestIDHeader)+"); the server log has the cause")
	}
}

// noSpaceMessage says what is full, from ErrNoSpace on: the Manager's
// words before it name the tenant's session key.
func noSpaceMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, session.ErrNoSpace.Error()); i >= 0 {
		return msg[i:]
	}
	return session.ErrNoSpace.Error()
}

// optionMessage is a refused option's message without the session key the
// Manager's errors carry (which names the tenant).
func optionMessage(err error) string {
	var oe *session.OptionError
	if errors.As(err, &oe) {
		return oe.Error()
	}
	return "invalid sandbox option"
}

// newID returns a fresh sandbox id: 128 random bits, lowercase hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// idRE is what a sandbox id may look like; others are refused before
// reaching the Manager.
var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// sandboxKey returns the tenant's session key of the request's {id}, or
// answers 400.
func sandboxKey(w http.ResponseWriter, r *http.Request) (id, key string, ok bool) {
	id = r.PathValue("id")
	if !idRE.MatchString(id) {
		writeError(w, http.StatusBadRequest, codeInvalidParameter, "invalid sandbox id: want letters, digits, - and _, at most 128")
		return "", "", false
	}
	t, _ := tenant.From(r.Context())
	return id, t.SessionKey(id), true
}
