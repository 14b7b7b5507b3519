package server

import (
	"log/slog"
	"net/http"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/execd"
	"github.com/agentbox/agentbox/server/mcpserver"
	"github.com/agentbox/agentbox/server/native"
	"github.com/agentbox/agentbox/server/opensandbox"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// SessionOptions are the Manager options agentbox serve needs: the tenant
// quotas (TENANT_MAX_*) counted per API key, over every API, whichever
// creates a session. The program and the tests start the Manager with
// them.
func SessionOptions() []session.Option {
	return []session.Option{session.WithQuotaGroup(tenant.Group)}
}

// APIs returns every API of agentbox serve over m, as Run mounts them: the
// OpenSandbox-compatible lifecycle API and the execd its endpoints point
// to (sharing tokens), MCP, and the native API. downloads (may be nil) is
// the artifact download handler. One place builds them, so that the
// program and its tests serve the same thing.
func APIs(m *session.Manager, cfg config.Config, keys *tenant.Keys, tokens tenant.Tokens, downloads http.Handler, log *slog.Logger) Mounts {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Mounts{
		OpenSandbox: opensandbox.NewHandler(m, opensandbox.Options{Keys: keys, Tokens: tokens, Config: cfg, Log: log}),
		Execd:       execd.NewHandler(m, execd.Options{Tokens: tokens, Keys: keys, Log: log}),
		// Behind Handler's guard, which checks Host names for every API.
		MCP:       mcpserver.HTTPHandler(m, mcpserver.Options{Keys: keys, Logger: log, HostChecked: true}),
		Native:    native.NewHandler(m, native.Options{Keys: keys, Log: log}),
		Artifacts: downloads,
	}
}
