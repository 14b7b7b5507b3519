package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/server/mcpserver"
)

func mcpUsage(w io.Writer) {
	fmt.Fprint(w, `usage: agentbox mcp

Serves agentbox to an MCP client (Claude Desktop, Cursor, an agent framework's
MCP adapter) over stdio: the client starts this command and speaks MCP on its
standard input and output; warnings go to standard error. It runs until the
client closes its input; the sessions' containers keep running after it exits.

tools: run_python (a persistent Python kernel: variables and imports survive
between calls), run_shell, write_file, read_file, list_files, list_artifacts
(with download URLs), list_datasets, select_dataset (when a dataset API is
configured), session_info, reset_session. Figures come back as images.

sessions: every tool takes an optional "session" argument naming the sandbox
session (any name, such as the conversation's id); calls with the same name
share Python state and files. Without it, the session "default". Names are
those of the tenant "local", as with agentbox serve without API keys:
agentbox ls shows the session "analysis" as local/analysis.

client configuration (the "mcpServers" file of Claude Desktop, Cursor and
others):

  {
    "mcpServers": {
      "agentbox": {
        "command": "agentbox",
        "args": ["mcp"],
        "env": {"AGENTBOX_NAMESPACE": "agentbox", "SANDBOX_IMAGE": "agentbox-sandbox:latest"}
      }
    }
  }

The client may start the command in any folder: put the settings in "env"
(a .env file is read from the folder it starts in). Over HTTP, agentbox serve
offers the same tools at /mcp.

environment: as for the other commands (see agentbox help), such as
AGENTBOX_NAMESPACE, SANDBOX_IMAGE, EXEC_TIMEOUT_S, DATASET_ACCESS,
ARTIFACT_PUBLIC_URL (the base of the download URLs) and DOCKER_HOST.
`)
}

// runMCP is `agentbox mcp`: the MCP server on stdin and stdout, for the
// tenant tenant.Local.
func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("mcp")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			mcpUsage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "agentbox: mcp: %v (see agentbox mcp --help)\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentbox: mcp: unexpected argument %q (see agentbox mcp --help)\n", fs.Arg(0))
		return exitUsage
	}
	m, status := openManager(ctx, stderr)
	if m == nil {
		return status
	}
	defer closeManager(ctx, m, stderr)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := mcpserver.New(m, mcpserver.Options{Logger: logger})
	err := srv.Run(ctx, &mcp.IOTransport{Reader: readCloser(stdin), Writer: nopWriteCloser{stdout}})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "agentbox: mcp: %s\n", oneLine(err))
		return exitSandbox
	}
	return exitOK
}

// readCloser is r, closable if it is not already: the transport closes its
// input when the session ends.
func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

// nopWriteCloser leaves stdout open when the transport closes it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
