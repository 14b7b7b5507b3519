package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/session"
)

// runPause is `agentbox pause KEY`: freeze a session, its state kept.
func runPause(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runLifecycle(ctx, "pause", args, stdout, stderr, func(m *session.Manager, key string) (string, error) {
		return "paused " + termsafe.Line(key), m.Pause(ctx, key)
	})
}

// runResume is `agentbox resume KEY`: thaw a paused session.
func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runLifecycle(ctx, "resume", args, stdout, stderr, func(m *session.Manager, key string) (string, error) {
		return "resumed " + termsafe.Line(key), m.Resume(ctx, key)
	})
}

// runRenew is `agentbox renew KEY DURATION`: the session expires DURATION
// from now.
func runRenew(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("renew")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "agentbox: renew: want a session KEY and a DURATION, such as 30m (see agentbox help)")
		return exitUsage
	}
	var d durationFlag
	if err := d.Set(fs.Arg(1)); err != nil {
		fmt.Fprintf(stderr, "agentbox: renew: duration %q: %s\n", termsafe.Line(fs.Arg(1)), err)
		return exitUsage
	}
	return runLifecycle(ctx, "renew", fs.Args()[:1], stdout, stderr, func(m *session.Manager, key string) (string, error) {
		exp, err := m.Renew(ctx, key, time.Duration(d))
		return fmt.Sprintf("renewed %s: expires %s (in %s)", termsafe.Line(key), exp.Local().Format(time.DateTime), time.Duration(d)), err
	})
}

// runLifecycle runs a command on one session KEY and prints what it says.
// A key with no session exits 1, as stop does.
func runLifecycle(ctx context.Context, name string, args []string, stdout, stderr io.Writer, do func(*session.Manager, string) (string, error)) int {
	fs := newFlags(name)
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "agentbox: %s: want one session KEY (see agentbox help)\n", name)
		return exitUsage
	}
	m, status := openManager(ctx, stderr)
	if m == nil {
		return status
	}
	defer closeManager(ctx, m, stderr)
	key := fs.Arg(0)
	said, err := do(m, key)
	if err != nil {
		if errors.Is(err, session.ErrNotFound) {
			fmt.Fprintf(stderr, "agentbox: %s: no such session %q\n", name, key)
			return exitFailed
		}
		return failure(ctx, stderr, err)
	}
	fmt.Fprintln(stdout, said)
	return exitOK
}

// runInfo is `agentbox info KEY [--json]`: describe one session.
func runInfo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("info")
	asJSON := fs.Bool("json", false, "")
	// `info KEY --json` as the usage writes it: info's flags take no
	// value, so they may come after the key.
	var flags, rest []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") && len(rest) > 0 && a != "-" {
			flags = append(flags, a)
			continue
		}
		rest = append(rest, a)
	}
	args = append(flags, rest...)
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "agentbox: info: want one session KEY (see agentbox help)")
		return exitUsage
	}
	m, status := openManager(ctx, stderr)
	if m == nil {
		return status
	}
	defer closeManager(ctx, m, stderr)
	key := fs.Arg(0)
	in, err := m.Info(ctx, key)
	if err != nil {
		if errors.Is(err, session.ErrNotFound) {
			fmt.Fprintf(stderr, "agentbox: info: no such session %q\n", key)
			return exitFailed
		}
		return failure(ctx, stderr, err)
	}
	if *asJSON {
		b, err := json.Marshal(in)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox: info: encode: %s\n", oneLine(err))
			return exitSandbox
		}
		fmt.Fprintf(stdout, "%s\n", termsafe.JSON(b))
		return exitOK
	}
	writeInfo(stdout, in, time.Now())
	return exitOK
}

// writeInfo prints in as aligned "name  value" lines; every value the
// sandbox or a caller chose is escaped.
func writeInfo(w io.Writer, in session.Info, now time.Time) {
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Local().Format(time.DateTime)
	}
	state := in.State
	switch {
	case in.State == session.StatePaused && !in.Paused.IsZero():
		state += " since " + at(in.Paused)
		if in.PausedBy == session.PausedByIdle {
			state += " by its idle timeout (its next call resumes it)"
		}
	case in.StopReason != "":
		state += ": " + in.StopReason
	}
	expires := "never (no time to live)"
	if !in.Expires.IsZero() {
		if in.Expires.After(now) {
			expires = at(in.Expires) + " (in " + since(now, in.Expires) + ")"
		} else {
			expires = at(in.Expires) + " (" + since(in.Expires, now) + " ago)"
		}
	}
	memory := "-"
	if in.MemoryBytes > 0 {
		memory = humanBytes(in.MemoryBytes)
	}
	limits := "-"
	if l := in.Limits; l != nil {
		limits = fmt.Sprintf("%d MiB memory, %s CPU, %d processes", l.MemoryMB, strconv.FormatFloat(l.CPUs, 'f', -1, 64), l.Pids)
		if l.TTL > 0 {
			limits += ", time to live " + l.TTL.String()
		}
	}
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(in.Labels)) {
		labels = append(labels, termsafe.Line(k)+"="+termsafe.Line(in.Labels[k]))
	}
	rows := [][2]string{
		{"session", termsafe.Line(in.Key)},
		{"id", in.ID},
		{"container", shortContainer(in.ContainerID)},
		{"state", termsafe.Line(state)},
		{"image", termsafe.Line(in.Image)},
		{"storage", in.Storage},
		{"created", at(in.Created) + " (" + since(in.Created, now) + " ago)"},
		{"last used", at(in.LastUsed) + " (" + since(in.LastUsed, now) + " ago)"},
		{"expires", expires},
		{"executions", strconv.Itoa(in.ExecutionCount)},
		{"memory", memory},
		{"limits", limits},
		{"labels", strings.Join(labels, ", ")},
	}
	for _, r := range rows {
		if r[1] == "" {
			r[1] = "-"
		}
		fmt.Fprintf(w, "%-11s %s\n", r[0], r[1])
	}
}

// kvFlag is a repeatable NAME=value flag (--env, --label).
type kvFlag map[string]string

func (f kvFlag) String() string { return "" }

func (f kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want NAME=value")
	}
	f[k] = v
	return nil
}
