package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/telemetry"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/session"
)

func serveUsage(w io.Writer) {
	fmt.Fprint(w, `usage: agentbox serve

Serves agentbox over HTTP until SIGINT or SIGTERM, so that programs written for
OpenSandbox's SDKs run against it unchanged (point them at this server's
address and an API key):

  /v1/sandboxes...   OpenSandbox's lifecycle API: create, get, list, delete,
                     pause, resume, renew-expiration, endpoints
  /execd/{id}/...    the sandboxes' execution daemon, where endpoints point:
                     commands, files, code in the persistent Python kernel
  /mcp               MCP over streamable HTTP (Authorization: Bearer <key>):
                     run_python in a persistent kernel, run_shell, files...
  /v1/agentbox/...   agentbox's own API: executions with ids (exactly-once,
                     results fetched later, SSE with resume), artifacts,
                     datasets; its OpenAPI document at /v1/agentbox/openapi.yaml
  /artifacts/{id}    artifact downloads (set ARTIFACT_PUBLIC_URL to this
                     server's address so that links point here)
  /healthz           liveness

Each API key is a tenant that sees and touches only its own sandboxes. On
shutdown sessions keep running; the next start serves them again.

environment (also read from ./.env; see example.env for all):
  SERVE_ADDR           listen address (default :8080)
  SERVE_API_KEYS       API keys, comma-separated, 16 characters or more each;
                       clients send one in the OPEN-SANDBOX-API-KEY header
  SERVE_API_KEYS_FILE  a file of more keys, one per line
                       With no key the server listens on loopback only (the
                       default :8080 becomes 127.0.0.1:8080; a host beyond
                       loopback is refused), where everyone is one tenant
                       and answers only loopback host names (DNS rebinding)
  SERVE_ALLOWED_HOSTS  more host names a keyless server answers
  SERVE_MAX_CONNS_PER_CLIENT   connections one client address may hold (256)
  SERVE_METRICS_KEY    bearer token of /metrics on a server with keys
  SANDBOX_IMAGE, SANDBOX_IMAGES   what sandboxes run: a requested image that is
                       not an allowed name or reference runs as SANDBOX_IMAGE
  SANDBOX_MAX_MEMORY_MB, SANDBOX_MAX_CPUS, SESSION_MAX_TTL_S   the most a sandbox
                       may ask for; a request above is refused (unset, memory
                       admits the OpenSandbox SDK's default 2Gi, lowered on a
                       host that cannot back it)
  SESSION_TTL_S        time to live of a sandbox created without a timeout
  TENANT_MAX_SANDBOXES, TENANT_MAX_MEMORY_MB, TENANT_MAX_INFLIGHT,
  TENANT_MAX_ARTIFACT_MB   each key's quotas, over every API (0: none); past
                       one a request is refused with 429 naming it
  AGENTBOX_NAMESPACE, ARTIFACTS_DB   whose sessions, and where their records are

The per-sandbox execd tokens are signed with a secret kept in
.sandbox-token-secret next to ARTIFACTS_DB (made on first start, owner-only),
so they stay valid across restarts; delete it to revoke them all.
`)
}

// runServe is agentbox serve.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			serveUsage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "agentbox: serve: %v (see agentbox serve --help)\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentbox: serve: unexpected argument %q (see agentbox serve --help)\n", fs.Arg(0))
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	log := slog.New(telemetry.LogHandler(slog.NewTextHandler(stderr, nil)))

	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintf(stderr, "agentbox: configuration: %s\n", oneLine(err))
		return exitUsage
	}
	keys, err := server.Keys(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox: configuration: %s\n", oneLine(err))
		return exitUsage
	}
	tokens, err := server.Tokens(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox: serve: %s\n", oneLine(err))
		return exitSandbox
	}
	reg := telemetry.NewRegistry() // this server's metrics, at /metrics
	m, err := session.NewManager(ctx, cfg, append(server.SessionOptions(), session.WithLogger(log), session.WithMetrics(reg))...)
	if err != nil {
		return failure(ctx, stderr, err)
	}
	downloads, err := artifacts.Open(ctx, cfg, artifacts.WithHandlerLogger(log))
	if err != nil {
		closeManager(ctx, m, stderr)
		fmt.Fprintf(stderr, "agentbox: serve: artifacts: %s\n", oneLine(err))
		return exitSandbox
	}
	defer downloads.Close()
	counted, err := telemetry.CountDownloads(reg, downloads)
	if err != nil {
		closeManager(ctx, m, stderr)
		fmt.Fprintf(stderr, "agentbox: serve: %s\n", oneLine(err))
		return exitSandbox
	}

	mounts := server.APIs(m, cfg, keys, tokens, counted, log)
	mounts.Metrics = telemetry.MetricsHandler(reg)
	// Run closes the Manager, leaving its sessions running.
	if err := server.Run(ctx, cfg, m, mounts, server.Options{Keys: keys, Log: log}); err != nil {
		fmt.Fprintf(stderr, "agentbox: serve: %s\n", oneLine(err))
		if errors.Is(err, server.ErrOpenWithoutKeys) {
			return exitUsage
		}
		return exitSandbox
	}
	return exitOK
}
