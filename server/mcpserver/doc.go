// Package mcpserver offers agentbox's sessions to any MCP client: a
// Model Context Protocol server (the official Go SDK) whose tools run
// Python in a persistent kernel, shell commands, and file, artifact and
// dataset calls on a session.Manager.
//
// New returns the server, to run over any transport (stdio for `agentbox
// mcp`, the SDK's in-memory transport in tests); HTTPHandler serves it over
// streamable HTTP, checking the API key a client sends as
// "Authorization: Bearer <key>" against Options.Keys (401 without a known
// key; with no keys configured every caller is tenant.Local).
//
// # Tools
//
// run_python, run_shell, write_file, read_file, list_files, list_artifacts,
// list_datasets, select_dataset (only when a dataset source is configured:
// a tool that could only refuse is not offered), session_info and
// reset_session. Their descriptions and text replies are those of package
// tools (the same caps, the same explanations for a model), so an agent
// reads the same sandbox whether it comes through MCP or a Go backend.
// Figures the code made come back as MCP image content as well.
//
// # Sessions
//
// Every tool takes an optional "session" argument naming the sandbox
// session to use. Without it the X-Agentbox-Session request header names it
// (HTTP only), and without that the MCP session does (its id; "default"
// over stdio, which has none). Clients such as LangGraph's MCP adapter open
// a new MCP session per tool call, so they must name the session one of the
// first two ways to keep their Python state from one call to the next. A
// sandbox session that defaults to an HTTP MCP session is stopped when
// that MCP session ends (the client's DELETE, Options.SessionTimeout
// idle), so such clients leave no container behind; named ones are kept. The
// name is always taken inside the caller's tenant
// (tenant.Tenant.SessionKey): two tenants naming the same session reach two
// sandboxes.
//
// # Errors
//
// Input a tool cannot use (missing code, a bad path, an unknown dataset,
// a bad session name) and failures of the system (engine unreachable) are
// tool results with isError set and a message for the model, never
// protocol errors. A Python exception, a non-zero exit status or a timeout
// is the outcome of the code, not an error of the tool: the reply shows it
// and isError stays false.
//
// # Contexts
//
// A tool call runs under the context the SDK gives it, which ends when the
// client cancels the call or goes away: running code is then interrupted
// (KeyboardInterrupt, state kept) and its partial result returned.
package mcpserver
