package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/tools"
)

// Options configure the server. The zero value is usable.
type Options struct {
	// Keys are the API keys HTTPHandler accepts, one tenant each. Nil or
	// empty: no key is asked for and every caller is tenant.Local, which is
	// safe only on a loopback address. New ignores it.
	Keys *tenant.Keys
	// MaxReplyBytes bounds each part of a text reply (stdout, stderr,
	// listings...), in bytes. Default tools.DefaultMaxReplyBytes (16 KiB).
	MaxReplyBytes int
	// MaxTimeout is the longest timeout_s run_python and run_shell accept.
	// Default tools.DefaultMaxTimeout (10 minutes).
	MaxTimeout time.Duration
	// MaxImageBytes bounds the images of one run_python reply, in bytes
	// (decoded). Figures past it are left out and the reply says so; their
	// artifact URLs are listed either way. Default 4 MiB.
	MaxImageBytes int
	// SessionTimeout closes an HTTP MCP session idle this long, and stops
	// the sandbox session it defaulted to (one named by the "session"
	// argument or SessionHeader is not touched: IDLE_TIMEOUT_S governs
	// that). Default 30 minutes.
	SessionTimeout time.Duration
	// Logger receives the system failures of tool calls (a failed engine,
	// a closed manager) and the SDK's logs. Default: discarded.
	Logger *slog.Logger
	// Version is the server version announced to clients. Default "dev".
	Version string
	// HostChecked says the handler is mounted behind a check of the Host
	// names the server answers (agentbox serve's guard: any with keys,
	// loopback and SERVE_ALLOWED_HOSTS without), so HTTPHandler turns off
	// the SDK's own, which refuses every name but loopback ones on a
	// loopback listener, even behind a reverse proxy or with a key.
	HostChecked bool
}

// Defaults of Options.
const (
	DefaultMaxImageBytes  = 4 << 20
	DefaultSessionTimeout = 30 * time.Minute
)

// SessionHeader is the HTTP request header that names the session when a
// tool call has no "session" argument.
const SessionHeader = "X-Agentbox-Session"

// DefaultSession is the session of a call that names none, over a
// transport without MCP session ids (stdio).
const DefaultSession = "default"

// maxSessionName bounds a session name, in bytes: ample for a thread id,
// and far under session.MaxKeyBytes with the tenant's prefix.
const maxSessionName = 512

// codeTool is the name the tools package's code tool has here.
const codeTool = "run_python"

func (o Options) withDefaults() Options {
	if o.MaxReplyBytes <= 0 {
		o.MaxReplyBytes = tools.DefaultMaxReplyBytes
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = tools.DefaultMaxTimeout
	}
	if o.MaxImageBytes <= 0 {
		o.MaxImageBytes = DefaultMaxImageBytes
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	return o
}

const instructions = "agentbox runs code in sandboxes that persist: each session is one sandbox with a " +
	"persistent Python kernel (variables and imports survive between run_python calls) and files under /session. " +
	"Give every call of one conversation the same \"session\" argument (any name you choose, such as the thread id) " +
	"so it reaches the same sandbox; a call without it uses the session the client's X-Agentbox-Session header " +
	"names, else one per MCP connection, which ends with it. Files saved under /session/artifacts/ (and figures) get download URLs."

// sessionProperty is the "session" argument every tool takes.
var sessionProperty = map[string]any{
	"type": "string",
	"description": "name of the sandbox session (any name, such as the conversation's thread id); " +
		"calls that give the same name share Python state and files. Optional: default the " +
		SessionHeader + " header, else this MCP connection's own session, which ends with the connection",
}

// server holds what every tool handler shares.
type server struct {
	m    *session.Manager
	opts Options

	mu sync.Mutex
	// ending holds the MCP sessions whose own sandbox session (the one
	// calls that name none default to) is stopped when they end.
	ending map[*mcp.ServerSession]bool
}

// New returns an MCP server whose tools work on m's sessions. Callers are
// tenant.Local unless the transport authenticated them (HTTPHandler).
func New(m *session.Manager, opts Options) *mcp.Server {
	opts = opts.withDefaults()
	s := &server{m: m, opts: opts, ending: map[*mcp.ServerSession]bool{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentbox", Title: "agentbox sandboxes", Version: opts.Version},
		&mcp.ServerOptions{Instructions: instructions, Logger: opts.Logger})
	list := tools.New(recorder{m}, tools.Options{
		SessionKey:    keyFromContext,
		MaxReplyBytes: opts.MaxReplyBytes,
		MaxTimeout:    opts.MaxTimeout,
		CodeToolName:  codeTool,
	})
	for _, t := range list {
		ann, ok := annotations[t.Name]
		if !ok {
			continue // export_dataset: not part of the MCP tool set
		}
		srv.AddTool(mcpTool(t.Name, t.Description, t.Schema, ann), s.handler(t.Call))
	}
	for _, t := range s.lifecycleTools() {
		srv.AddTool(mcpTool(t.Name, t.Description, t.Schema, annotations[t.Name]), s.handler(t.Call))
	}
	return srv
}

// annotations are the hints of each tool offered, by name.
var annotations = map[string]mcp.ToolAnnotations{
	codeTool:         {Title: "Run Python"},
	"run_shell":      {Title: "Run a shell command"},
	"write_file":     {Title: "Write a file"},
	"read_file":      {Title: "Read a file", ReadOnlyHint: true},
	"list_files":     {Title: "List files", ReadOnlyHint: true},
	"list_artifacts": {Title: "List artifacts", ReadOnlyHint: true},
	"list_datasets":  {Title: "List datasets", ReadOnlyHint: true},
	"select_dataset": {Title: "Load a dataset", IdempotentHint: true},
	"session_info":   {Title: "Describe the session", ReadOnlyHint: true},
	"reset_session":  {Title: "Reset the session", IdempotentHint: true, DestructiveHint: ptr(true)},
}

func ptr[T any](v T) *T { return &v }

// mcpTool is the MCP definition of a tool: its schema gains the "session"
// argument. The schemas are this program's own: one that is not a JSON
// object is a bug, reported as the SDK reports its own (a panic in New).
func mcpTool(name, description string, schema json.RawMessage, ann mcp.ToolAnnotations) *mcp.Tool {
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		panic(fmt.Sprintf("mcpserver: tool %s: schema: %v", name, err))
	}
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		s["properties"] = props
	}
	props["session"] = sessionProperty
	return &mcp.Tool{Name: name, Description: description, InputSchema: s, Annotations: &ann}
}

// call is a tool's body, as the tools package shapes it: the model's
// input without "session", the text for the model, and an error only
// when the system failed.
type call func(ctx context.Context, input json.RawMessage) (string, error)

// handler adapts a tool body to MCP: it finds the caller's tenant and
// session, runs the body with the session key in ctx, and turns every
// outcome into a tool result (never a protocol error).
func (s *server) handler(body call) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		input, name, problem := sessionName(req)
		if problem != "" {
			return errorResult(problem), nil
		}
		t, err := callerTenant(req)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		key := t.SessionKey(name)
		if req.Session != nil && req.Session.ID() != "" && name == req.Session.ID() {
			s.endWith(req.Session, key)
		}
		o := &outcome{}
		ctx = withOutcome(withKey(ctx, key, name), o)
		text, err := body(ctx, input)
		if err != nil {
			s.opts.Logger.WarnContext(ctx, "mcp tool call failed", "tool", req.Params.Name, "session_key", key, "err", err)
			return errorResult(systemMessage(ctx, err)), nil
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: o.isError()}
		if r := o.execResult(); r != nil {
			res.Content = append(res.Content, images(r, s.opts.MaxImageBytes)...)
		}
		return res, nil
	}
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}

// systemMessage explains a failure of the system to the model (and the
// person behind it), with the fix when there is one.
func systemMessage(ctx context.Context, err error) string {
	hint := ""
	switch {
	case ctx.Err() != nil:
		return "The call was cancelled before it finished."
	case errors.Is(err, session.ErrPaused):
		hint = " The session is paused: it runs nothing until it is resumed (agentbox resume, or the server's API)."
	case errors.Is(err, session.ErrImageMissing), errors.Is(err, session.ErrImageStale):
		hint = " The operator must run sandbox-setup."
	case errors.Is(err, session.ErrNoSpace):
		hint = " Storage is full: free space in /session (delete files) or ask the operator for room."
	case errors.Is(err, session.ErrUnavailable):
		return "agentbox failed: the sandbox engine is unreachable; try again later."
	case errors.Is(err, session.ErrClosed):
		hint = " The server is shutting down."
	case errors.Is(err, session.ErrStorageFull):
		return "agentbox failed: the server's disk is full; the operator must make room. Try again later."
	case !known(err):
		// The cause may name the server's own files: it is logged.
		return "agentbox failed: internal error; the server's log has the cause."
	}
	return "agentbox failed: " + err.Error() + "." + hint
}

// known reports whether err is one of the Manager's classified failures,
// whose text says what a caller needs (and no host path).
func known(err error) bool {
	for _, s := range []error{session.ErrNotFound, session.ErrInvalidKey, session.ErrSessionLost,
		session.ErrExpired, session.ErrBusy, session.ErrOutcomeUnknown, session.ErrUnknownExecution,
		session.ErrInvalidOption, session.ErrAboveMaximum, session.ErrImageNotAllowed,
		session.ErrNoDatasetSource, session.ErrQuota, errUnknownCaller} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// errUnknownCaller is the answer to a call whose transport authenticated
// a caller this package did not: it cannot tell whose sessions to use.
var errUnknownCaller = errors.New("the caller's credentials name no agentbox tenant: serve this server with HTTPHandler")

// tenantExtra is the key of TokenInfo.Extra under which HTTPHandler's
// verifier puts the caller's tenant.Tenant.
const tenantExtra = "agentbox.tenant"

// callerTenant is the tenant of a call: the one HTTPHandler authenticated,
// or tenant.Local for a transport without authentication (stdio, in
// memory, HTTP with no keys).
func callerTenant(req *mcp.CallToolRequest) (tenant.Tenant, error) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return tenant.Local, nil
	}
	t, ok := req.Extra.TokenInfo.Extra[tenantExtra].(tenant.Tenant)
	if !ok || t.ID == "" {
		return tenant.Tenant{}, errUnknownCaller
	}
	return t, nil
}
