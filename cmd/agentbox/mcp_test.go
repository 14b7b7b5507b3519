package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMCPHelp(t *testing.T) {
	for _, args := range [][]string{{"mcp", "--help"}, {"mcp", "-h"}} {
		r := agentbox(t, "", args...)
		if r.code != exitOK {
			t.Errorf("%v: exit %d", args, r.code)
		}
		for _, want := range []string{"usage: agentbox mcp", "stdio", `"mcpServers"`, `"args": ["mcp"]`, "run_python", `"session"`, "/mcp"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v: help does not mention %q", args, want)
			}
		}
	}
}

func TestMCPUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"mcp", "extra"}, {"mcp", "--port", "1"}} {
		r := agentbox(t, "", args...)
		if r.code != exitUsage || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d and nothing", args, r.code, r.stdout, exitUsage)
		}
		oneErrorLine(t, r.stderr)
	}
}

// TestMCPStdio: an MCP client speaking to `agentbox mcp` over its stdin and
// stdout keeps Python state across calls in a session, sessions are apart,
// and the command ends cleanly when the client closes its input.
func TestMCPStdio(t *testing.T) {
	sandboxEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr strings.Builder
	done := make(chan int, 1)
	go func() {
		code := run(ctx, []string{"mcp"}, inR, outW, &stderr)
		outW.Close()
		done <- code
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	text := func(args string) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("call %s: %v", args, err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	text(`{"code": "x = 'kept'"}`)
	if got := text(`{"code": "print(x)"}`); !strings.Contains(got, "stdout:\nkept\n") {
		t.Errorf("state did not persist in the default session: %s", got)
	}
	if got := text(`{"code": "print(x)", "session": "other"}`); !strings.Contains(got, "NameError") {
		t.Errorf("another session sees x: %s", got)
	}
	cs.Close()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d; stderr %q", code, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("agentbox mcp did not end when the client closed its input")
	}
	if r := agentbox(t, "", "ls"); !strings.Contains(r.stdout, "local/default") || !strings.Contains(r.stdout, "local/other") {
		t.Errorf("ls does not show the tenant's sessions local/default and local/other:\n%s", r.stdout)
	}
}
