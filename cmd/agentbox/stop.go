package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/session"
)

// runStop is `agentbox stop KEY | --all`: remove session containers. Their
// history stays, so --id replays still work afterwards.
//
// Stopping a key with no session exits 1, not 3: nothing failed in the
// sandbox, the thing asked for just is not there (as with rm of a missing
// file). A script that wants "make sure it is gone" can ignore status 1.
func runStop(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("stop")
	all := fs.Bool("all", false, "")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	switch {
	case *all && fs.NArg() > 0:
		fmt.Fprintln(stderr, "agentbox: stop: give a KEY or --all, not both (see agentbox help)")
		return exitUsage
	case !*all && fs.NArg() != 1:
		fmt.Fprintln(stderr, "agentbox: stop: want one session KEY, or --all (see agentbox help)")
		return exitUsage
	}
	m, status := openManager(ctx, stderr)
	if m == nil {
		return status
	}
	defer closeManager(ctx, m, stderr)
	if *all {
		// The list is only for naming what goes; StopAll counts what went.
		list, _ := m.List(ctx)
		n, err := m.StopAll(ctx)
		if n > 0 || err == nil {
			fmt.Fprintf(stdout, "stopped %d %s%s\n", n, plural(n, "session", "sessions"), names(list, n))
		}
		if err != nil {
			return failure(ctx, stderr, err)
		}
		return exitOK
	}
	key := fs.Arg(0)
	if err := m.Stop(ctx, key); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			fmt.Fprintf(stderr, "agentbox: stop: no such session %q\n", key)
			return exitFailed
		}
		return failure(ctx, stderr, err)
	}
	fmt.Fprintf(stdout, "stopped %s\n", termsafe.Line(key))
	return exitOK
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// names is ": a, b" for the listed sessions, or "" if the list does not
// match what was stopped (one started or ended in between).
func names(list []session.Info, n int) string {
	if n == 0 || len(list) != n {
		return ""
	}
	keys := make([]string, len(list))
	for i, in := range list {
		keys[i] = strconv.Quote(in.Key)
		if in.Key == "" {
			keys[i] = termsafe.Line(in.ID)
		}
	}
	return ": " + strings.Join(keys, ", ")
}
