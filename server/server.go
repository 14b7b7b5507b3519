// Package server is agentbox serve's HTTP server: it mounts the APIs
// (OpenSandbox-compatible lifecycle and execd, MCP, the native API, artifact
// downloads) on one listener in front of a session.Manager.
//
// The APIs are plain http.Handlers passed in Mounts, so each lives in its
// own package (server/opensandbox, server/execd, ...) and this one imports
// none of them. Run listens, serves until its context ends, then shuts the
// server down gracefully and closes the Manager without stopping any
// session: the containers keep running, their state is in the engine and
// the database, and a server started later serves them again.
//
// Secrets: the API keys (SERVE_API_KEYS, SERVE_API_KEYS_FILE) are tenants
// (tenant.NewKeys) and are never logged. The per-sandbox execd tokens are
// signed with a secret kept in a file next to ARTIFACTS_DB (TokenSecretFile,
// made on first start, owner-only), so tokens handed out before a restart
// still work after it; delete the file to revoke them all. A token also
// ends at SANDBOX_TOKEN_TTL_S, when its key is no longer configured, and
// when its sandbox is deleted and created again (see tenant.Tokens).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Mounts are the APIs the server serves; a nil one is not mounted.
type Mounts struct {
	// OpenSandbox serves /v1/sandboxes... and /v1/snapshots...
	// (opensandbox.NewHandler).
	OpenSandbox http.Handler
	// Execd serves /execd/{id}/..., the per-sandbox execution daemon the
	// lifecycle API's endpoints point at.
	Execd http.Handler
	// MCP serves /mcp (streamable HTTP).
	MCP http.Handler
	// Native serves /v1/agentbox/...
	Native http.Handler
	// Artifacts serves /artifacts/{id}?token=... (artifacts.Open); set
	// ARTIFACT_PUBLIC_URL to this server's address so links point here.
	Artifacts http.Handler
	// Metrics serves GET /metrics (telemetry.MetricsHandler): its labels
	// carry no session key or tenant, but its counts are every tenant's,
	// so a server with API keys serves it only with SERVE_METRICS_KEY.
	Metrics http.Handler
	// Tracing receives a server span per request, the child of the W3C
	// trace context (traceparent) the request carries, so the Manager's
	// spans join the caller's trace. Nil: the global provider (no-op
	// unless the program set one).
	Tracing trace.TracerProvider
}

// Server timeouts. There is no read or write timeout on whole requests:
// command and code streams last as long as the code runs, and uploads may
// be large. A client that is slow to send its headers or its body (see
// DefaultBodyTimeout), or that keeps an idle connection, is cut off.
const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 64 << 10
	// ShutdownTimeout is how long a stopping server lets requests in
	// flight finish before it closes their connections.
	ShutdownTimeout = 30 * time.Second
	// closeTimeout bounds closing the Manager after the server stopped.
	closeTimeout = 30 * time.Second
)

// TokenSecretFileName is the file, next to ARTIFACTS_DB, holding the secret
// that signs per-sandbox execd tokens.
const TokenSecretFileName = ".sandbox-token-secret"

// ErrOpenWithoutKeys means the server would listen beyond loopback with no
// API key: anyone who can reach it could run code.
var ErrOpenWithoutKeys = errors.New("no API key configured: set SERVE_API_KEYS or SERVE_API_KEYS_FILE, or listen on loopback only (SERVE_ADDR=127.0.0.1:8080)")

// ErrSharedDatasets means the server has API keys (tenants) and a dataset
// cache that would serve one tenant's datasets to another.
var ErrSharedDatasets = errors.New("DATASET_CACHE_SCOPE=shared or namespace serves a dataset one tenant selected to every other without asking the fetcher: with API keys set it to session (the default)")

// Options are Run's dependencies.
type Options struct {
	// Keys are the tenants' API keys, for the no-key check (the mounts
	// authenticate their own requests). Nil or empty: none.
	Keys *tenant.Keys
	// Log receives the server's own lines (listening, stopping, errors
	// of the HTTP server). Nil: none.
	Log *slog.Logger
	// Listener, when set, is served instead of listening on
	// cfg.ServeAddr (tests pass one on a free port).
	Listener net.Listener
	// Ready, when set, is called with the address once the server accepts
	// connections.
	Ready func(addr net.Addr)
	// BodyTimeout is how long a request body may take beyond what its
	// size needs at MinBodyRate. 0 means DefaultBodyTimeout.
	BodyTimeout time.Duration
}

// Keys loads the API keys cfg names (Config.APIKeys) as tenants.
func Keys(cfg config.Config) (*tenant.Keys, error) {
	keys, err := cfg.APIKeys()
	if err != nil {
		return nil, fmt.Errorf("load API keys: %w", err)
	}
	return tenant.NewKeys(keys), nil
}

// TokenSecretFile is where the execd token secret of cfg is kept.
func TokenSecretFile(cfg config.Config) string {
	return filepath.Join(filepath.Dir(cfg.ArtifactsDB), TokenSecretFileName)
}

// Tokens returns the per-sandbox token issuer of cfg, its secret read from
// TokenSecretFile (made, owner-only, when missing), its tokens lasting
// SANDBOX_TOKEN_TTL_S.
func Tokens(cfg config.Config) (tenant.Tokens, error) {
	secret, err := artifacts.LoadOrCreateSecret(TokenSecretFile(cfg))
	if err != nil {
		return tenant.Tokens{}, fmt.Errorf("sandbox token secret: %w", err)
	}
	return tenant.NewTokens(secret, tenant.WithTokenTTL(cfg.SandboxTokenTTL)), nil
}

// MaxBodyBytes is the largest request body the server reads, whatever the
// route: one files upload of FILES_MAX_CALL_MB plus room for its multipart
// framing. Each API caps its own requests lower where it can.
func MaxBodyBytes(cfg config.Config) int64 {
	return int64(cfg.FilesMaxCallMB)<<20 + 1<<20
}

// Handler returns the routes of mounts on one mux, plus GET /healthz,
// behind p: requests a browser could send on a web page's behalf are
// refused (Policy.check), bodies are capped at p.MaxBody and must arrive
// in time, refusals close their connection, and /metrics needs its key on a
// server with API keys.
func Handler(mounts Mounts, p Policy) http.Handler {
	mux := http.NewServeMux()
	mount := func(h http.Handler, patterns ...string) {
		if h == nil {
			return
		}
		for _, pat := range patterns {
			mux.Handle(pat, h)
		}
	}
	mount(mounts.OpenSandbox, "/v1/sandboxes", "/v1/sandboxes/", "/v1/snapshots", "/v1/snapshots/")
	mount(mounts.Execd, "/execd/")
	mount(mounts.MCP, "/mcp", "/mcp/")
	mount(mounts.Native, "/v1/agentbox/")
	mount(mounts.Artifacts, artifacts.DownloadPath)
	if mounts.Metrics != nil {
		mux.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if no := p.metrics(r); no != nil {
				if no.status == http.StatusUnauthorized {
					w.Header().Set("WWW-Authenticate", `Bearer realm="agentbox metrics"`)
				}
				writeRefusal(w, no)
				return
			}
			mounts.Metrics.ServeHTTP(w, r)
		}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeRefusal(w, &refusal{http.StatusNotFound, "NOT_FOUND", "no such route"})
	})
	grace := p.BodyTimeout
	if grace <= 0 {
		grace = DefaultBodyTimeout
	}
	api := traced(mounts.Tracing, mux)
	// Outside the tracing wrapper, whose writer hides the connection from
	// http.ResponseController (the body deadline needs it).
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := closingWriter{rw}
		if p.MaxBody > 0 && r.ContentLength > p.MaxBody {
			writeRefusal(w, &refusal{http.StatusRequestEntityTooLarge, "REQUEST_TOO_LARGE", "request body too large"})
			return
		}
		if no := p.check(r); no != nil {
			writeRefusal(w, no)
			return
		}
		if hasBody(r) {
			r.Body = newDeadlineBody(rw, r, grace)
		}
		if p.MaxBody > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, p.MaxBody)
		}
		api.ServeHTTP(w, r)
	})
}

// writeRefusal answers with the JSON every API of the server uses for an
// error: {"code", "message"}.
func writeRefusal(w http.ResponseWriter, no *refusal) {
	w.Header().Set("Content-Type", "application/json")
	if no.status == http.StatusForbidden || no.status == http.StatusUnsupportedMediaType {
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(no.status)
	body, _ := json.Marshal(map[string]string{"code": no.code, "message": no.message})
	_, _ = w.Write(append(body, '\n'))
}

// traced opens a server span per request (but /healthz and /metrics, which
// a prober calls all day), a child of the request's W3C trace context.
func traced(tp trace.TracerProvider, h http.Handler) http.Handler {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return otelhttp.NewHandler(h, "agentbox serve",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
		otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != "/healthz" && r.URL.Path != "/metrics" }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + routeOf(r.URL.Path) }),
	)
}

// routeOf is the API a path belongs to, a span name of few values.
func routeOf(p string) string {
	for _, prefix := range []string{"/v1/sandboxes", "/v1/snapshots", "/execd/", "/mcp", "/v1/agentbox/", artifacts.DownloadPath} {
		if strings.HasPrefix(p, prefix) {
			return prefix
		}
	}
	return "/"
}

// Run serves mounts on cfg.ServeAddr (or opts.Listener) until ctx ends,
// then shuts down: requests in flight get ShutdownTimeout to finish, and m
// is closed (its sessions keep running). It refuses to start with no API
// key unless the listener is on a loopback address. It returns nil after a
// shutdown asked for by ctx, else why the server stopped or could not start.
// Run closes m in every case.
func Run(ctx context.Context, cfg config.Config, m *session.Manager, mounts Mounts, opts Options) (err error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		if cerr := m.Close(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close manager: %w", cerr))
		}
	}()

	nkeys := opts.Keys.Len()
	ln := opts.Listener
	if ln == nil {
		addr := cfg.ServeAddr
		if host, port, err := net.SplitHostPort(addr); err == nil && host == "" && nkeys == 0 {
			// No host (the default :8080) and no key: loopback only, as
			// the refusal below would demand; a host named beyond
			// loopback is still refused.
			addr = net.JoinHostPort("127.0.0.1", port)
			log.Warn("no API key configured: listening on loopback only (set SERVE_API_KEYS to serve other hosts)", "addr", addr)
		}
		ln, err = net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
	}
	defer ln.Close() // Serve closes it too; a refused start must as well
	// "" is the session scope; the Manager validated the rest.
	if nkeys > 0 && cfg.DatasetCacheScope != "" && cfg.DatasetCacheScope != config.CacheSession {
		return fmt.Errorf("serve with %d API keys: %w", nkeys, ErrSharedDatasets)
	}
	if nkeys == 0 {
		if !loopback(ln.Addr()) {
			return fmt.Errorf("serve on %s: %w", ln.Addr(), ErrOpenWithoutKeys)
		}
		log.Warn("no API key configured: every client of this loopback address is one tenant", "addr", ln.Addr().String())
	}

	policy := Policy{
		Keyless:     nkeys == 0,
		Hosts:       append(slices.Clip(cfg.ServeAllowedHosts), hostName(cfg.ServeAddr)),
		MetricsKey:  cfg.ServeMetricsKey,
		MaxBody:     MaxBodyBytes(cfg),
		BodyTimeout: opts.BodyTimeout,
	}
	if u, err := url.Parse(cfg.ArtifactPublicURL); err == nil && u.Host != "" {
		policy.Hosts = append(policy.Hosts, hostName(u.Host)) // download links name it
	}
	srv := &http.Server{
		Handler:           Handler(mounts, policy),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(limitPerClient(ln, cfg.ServeMaxConnsPerClient)) }()
	log.Info("serving", "addr", ln.Addr().String(), "namespace", m.Namespace(), "keys", nkeys)
	if opts.Ready != nil {
		opts.Ready(ln.Addr())
	}

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: sessions keep running")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Streams still open after the timeout are cut off; the server
		// stopped as asked.
		log.Warn("closing requests still running after the shutdown timeout", "timeout", ShutdownTimeout)
		srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// loopback reports whether addr accepts connections from this host only.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP != nil && tcp.IP.IsLoopback()
}
