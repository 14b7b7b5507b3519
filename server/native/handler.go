package native

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// Prefix is where the native API is served.
const Prefix = "/v1/agentbox/"

// Defaults of Options.
const (
	DefaultMaxBodyBytes = 8 << 20
	DefaultMaxTimeout   = time.Hour
	DefaultKeepAlive    = 15 * time.Second
	DefaultReplayBytes  = 1 << 20
)

//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns the OpenAPI 3 document of the routes, as served at
// /v1/agentbox/openapi.yaml.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// Options configure the handler. The zero value serves tenant.Local with
// the defaults. Artifact download URLs are the Manager's own, signed with
// its secret on ARTIFACT_PUBLIC_URL: point that at wherever the artifacts
// download handler (artifacts.Open) is served.
type Options struct {
	// Keys are the API keys (tenants) accepted as "Authorization: Bearer
	// <key>". Nil or empty: no key is asked for and every caller is
	// tenant.Local (a server should allow that on loopback only).
	Keys *tenant.Keys
	// Log receives one line per failed request (server errors); nil
	// discards. Keys and tokens are never logged.
	Log *slog.Logger
	// MaxBodyBytes caps a request body; larger is 413. 0 means
	// DefaultMaxBodyBytes (8 MiB).
	MaxBodyBytes int64
	// MaxTimeout caps an execution's timeout_s; 0 means DefaultMaxTimeout
	// (an hour).
	MaxTimeout time.Duration
	// KeepAlive is how often a quiet event stream gets a comment line, so
	// proxies keep it open; 0 means DefaultKeepAlive (15 s).
	KeepAlive time.Duration
	// ReplayBytes caps the output a running execution keeps in memory for
	// clients that resume its stream; older events are dropped (a client
	// resuming past them gets the recorded result). 0 means
	// DefaultReplayBytes (1 MiB).
	ReplayBytes int
}

// handler serves the native API over a Manager.
type handler struct {
	m    *session.Manager
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux

	mu   sync.Mutex
	runs map[runKey]*run // executions started here and still running
}

// NewHandler returns the native API over m, serving under Prefix.
func NewHandler(m *session.Manager, opts Options) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxTimeout <= 0 {
		opts.MaxTimeout = DefaultMaxTimeout
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.ReplayBytes <= 0 {
		opts.ReplayBytes = DefaultReplayBytes
	}
	h := &handler{m: m, opts: opts, log: opts.Log, runs: make(map[runKey]*run)}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.mux = http.NewServeMux()
	for _, rt := range h.routes() {
		h.mux.Handle(rt.pattern, rt.handler)
	}
	return h
}

// route is one pattern of the mux; routes lists them all, so the test that
// holds them against the OpenAPI document sees exactly what is served.
type route struct {
	pattern string
	handler http.Handler
}

func (h *handler) routes() []route {
	const s = "/v1/agentbox/sessions/{session}"
	return []route{
		{"GET /v1/agentbox/openapi.yaml", http.HandlerFunc(serveOpenAPI)},
		{"GET " + s, h.auth(h.getSession)},
		{"DELETE " + s, h.auth(h.deleteSession)},
		{"POST " + s + "/executions", h.auth(h.postExecution)},
		{"GET " + s + "/executions/{id}", h.auth(h.getExecution)},
		{"GET " + s + "/artifacts", h.auth(h.getArtifacts)},
		{"GET " + s + "/datasets", h.auth(h.getDatasets)},
		{"POST " + s + "/datasets/{id}/select", h.auth(h.selectDataset)},
	}
}

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(openAPI)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-ID")
	if !validRequestID(id) {
		id = newRequestID()
	}
	w.Header().Set("X-Request-ID", id)
	if _, pattern := h.mux.Handler(r); pattern == "" {
		// The mux's own 404 and 405 are plain text: answer in the API's
		// shape, keeping the mux's status and Allow header.
		h.mux.ServeHTTP(&muxError{ResponseWriter: w}, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// muxError turns the mux's plain-text error into a JSON one.
type muxError struct {
	http.ResponseWriter
	wrote bool
}

func (e *muxError) WriteHeader(status int) {
	if e.wrote {
		return
	}
	e.wrote = true
	code, msg := "not_found", "no such route"
	if status == http.StatusMethodNotAllowed {
		code, msg = "method_not_allowed", "method not allowed on this route"
	}
	e.Header().Del("X-Content-Type-Options")
	writeJSONStatus(e.ResponseWriter, status, apiError{Code: code, Message: msg})
}

func (e *muxError) Write(p []byte) (int, error) {
	if !e.wrote {
		e.WriteHeader(http.StatusNotFound)
	}
	return len(p), nil // the mux's text is dropped
}

// validRequestID accepts a caller's request id worth echoing: short,
// visible ASCII.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// auth finds the caller's tenant and puts it in the request's context.
func (h *handler) auth(next func(http.ResponseWriter, *http.Request, call)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenant.Local
		if h.opts.Keys != nil && h.opts.Keys.Len() > 0 {
			key, ok := bearer(r.Header.Get("Authorization"))
			var err error
			if ok {
				t, err = h.opts.Keys.Lookup(key)
			} else {
				err = tenant.ErrNoKey
			}
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="agentbox"`)
				msg := "missing API key: send Authorization: Bearer <key>"
				if errors.Is(err, tenant.ErrBadKey) {
					msg = "unknown API key"
				}
				writeJSONStatus(w, http.StatusUnauthorized, apiError{Code: "unauthorized", Message: msg})
				return
			}
		}
		name := r.PathValue("session")
		if name == "" || len(name) > maxNameBytes {
			writeJSONStatus(w, http.StatusBadRequest, apiError{Code: "invalid_session",
				Message: "a session name is 1 to 1024 bytes"})
			return
		}
		r = r.WithContext(tenant.With(r.Context(), t))
		next(w, r, call{tenant: t, name: name, key: t.SessionKey(name)})
	})
}

// maxNameBytes bounds a caller's session name (the key adds the tenant).
const maxNameBytes = 1024

// call is who asks about which session.
type call struct {
	tenant tenant.Tenant
	name   string // the caller's session name
	key    string // the Manager's session key
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(v string) (string, bool) {
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// decode reads a JSON request body into v: at most MaxBodyBytes, one
// object, no unknown fields. An empty body is allowed when emptyOK. It
// writes the error response itself and returns false on bad input.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			writeJSONStatus(w, http.StatusUnsupportedMediaType, apiError{Code: "unsupported_media_type",
				Message: "send the body as application/json"})
			return false
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeJSONStatus(w, http.StatusRequestEntityTooLarge, apiError{Code: "body_too_large",
			Message: "request body over " + byteCount(tooLarge.Limit)})
		return false
	}
	if err != nil {
		writeJSONStatus(w, http.StatusBadRequest, apiError{Code: "bad_request", Message: "read body: " + err.Error()})
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if emptyOK {
			return true
		}
		writeJSONStatus(w, http.StatusBadRequest, apiError{Code: "invalid_json", Message: "empty body: send a JSON object"})
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSONStatus(w, http.StatusBadRequest, apiError{Code: "invalid_json", Message: "body: " + err.Error()})
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeJSONStatus(w, http.StatusBadRequest, apiError{Code: "invalid_json", Message: "body: more than one JSON value"})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"code":"internal","message":"encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
