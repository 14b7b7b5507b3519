package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/agentbox/agentbox/server/tenant"
)

// runTenant is `agentbox tenant`: the tenant id of each API key read from
// standard input, one a line, so that an operator can tell whose sessions
// `agentbox ls` shows (a served session's key is TENANT/NAME, and the
// tenant is a hash of the API key, never the key).
func runTenant(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("tenant")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "agentbox: tenant: the API keys come on standard input, one a line, never as arguments (they would stay in the shell's history)")
		return exitUsage
	}
	sc := bufio.NewScanner(stdin)
	n := 0
	for sc.Scan() {
		key := strings.TrimSpace(sc.Text())
		if key == "" {
			continue
		}
		t, err := tenant.NewKeys([]string{key}).Lookup(key)
		if err != nil { // cannot happen: the key is its own
			fmt.Fprintf(stderr, "agentbox: tenant: %v\n", err)
			return exitUsage
		}
		fmt.Fprintln(stdout, t.ID)
		n++
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(stderr, "agentbox: tenant: read standard input: %s\n", oneLine(err))
		return exitUsage
	}
	if n == 0 {
		fmt.Fprintln(stderr, "agentbox: tenant: no API key on standard input (one a line)")
		return exitUsage
	}
	return exitOK
}
