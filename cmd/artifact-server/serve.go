package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/telemetry"
)

// Server timeouts. There is no write timeout: a large artifact on a slow
// link may take long, and a stalled client costs only a goroutine and a file
// descriptor, which the idle and TCP keep-alive timeouts reclaim.
const (
	readHeaderTimeout = 10 * time.Second
	// readTimeout covers the whole request, which has no body worth waiting
	// for: only GET and HEAD are served.
	readTimeout    = 30 * time.Second
	idleTimeout    = 2 * time.Minute
	maxHeaderBytes = 64 << 10
	// shutdownTimeout is how long a stopping server lets downloads finish
	// before it closes their connections.
	shutdownTimeout = 30 * time.Second
)

// serve runs the download server until ctx is done.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, stdout, stderr io.Writer) int {
	h, err := artifacts.Open(ctx, cfg, artifacts.WithHandlerLogger(log))
	if err != nil {
		fmt.Fprintf(stderr, "artifact-server: %v\n", err)
		return exitProblem
	}
	defer h.Close()
	reg := telemetry.NewRegistry()
	downloads, err := telemetry.CountDownloads(reg, h)
	if err != nil {
		fmt.Fprintf(stderr, "artifact-server: %v\n", err)
		return exitProblem
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", telemetry.MetricsHandler(reg))
	mux.Handle("/", downloads)

	ln, err := net.Listen("tcp", cfg.ArtifactServerAddr)
	if err != nil {
		fmt.Fprintf(stderr, "artifact-server: %v\n", err)
		return exitProblem
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "artifact-server: serving %s on http://%s (links use %s)\n",
		cfg.BlobstoreDir, ln.Addr(), cfg.ArtifactPublicURL)

	select {
	case err := <-served:
		fmt.Fprintf(stderr, "artifact-server: %v\n", err)
		return exitProblem
	case <-ctx.Done():
	}
	// The signal context is done; the shutdown needs its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Downloads still running after the timeout are cut off; the
		// server stopped as asked, so this is no failure.
		fmt.Fprintf(stderr, "artifact-server: closing downloads still running after %s\n", shutdownTimeout)
		srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "artifact-server: %v\n", err)
		return exitProblem
	}
	fmt.Fprintln(stdout, "artifact-server: stopped")
	return exitOK
}
