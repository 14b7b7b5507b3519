package mcpserver

import (
	"context"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/session"
)

// HTTPHandler serves New's server over MCP's streamable HTTP transport, to
// be mounted at /mcp. With opts.Keys holding keys, every request must carry
// one as "Authorization: Bearer <key>" (401 otherwise) and its tenant owns
// the MCP session it opens: another key cannot use that session. With no
// keys every caller is tenant.Local. Request bodies are capped at the SDK's
// mcp.DefaultMaxRequestBodyBytes (4 MiB, write_file's content included: a
// larger file is better made by code or copied in with agentbox cp), and
// MCP sessions idle for opts.SessionTimeout are closed.
func HTTPHandler(m *session.Manager, opts Options) http.Handler {
	opts = opts.withDefaults()
	srv := New(m, opts)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger:         opts.Logger,
		SessionTimeout: opts.SessionTimeout,
		// DNS rebinding: checked by whoever mounts it, when it says so.
		DisableLocalhostProtection: opts.HostChecked,
	})
	if opts.Keys == nil || opts.Keys.Len() == 0 {
		return h
	}
	// The key is checked on every request. The tenant rides in the token
	// info, which the SDK hands to each tool call (RequestExtra) and
	// compares, by UserID, with the MCP session's owner.
	verify := func(_ context.Context, key string, _ *http.Request) (*auth.TokenInfo, error) {
		t, err := opts.Keys.Lookup(key)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: t.ID, Extra: map[string]any{tenantExtra: t}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}
