package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/session"
)

// runLs is `agentbox ls`: the sessions of the namespace, whichever process
// started them.
func runLs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("ls")
	asJSON := fs.Bool("json", false, "")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentbox: ls: unexpected argument %q (see agentbox help)\n", fs.Arg(0))
		return exitUsage
	}
	m, status := openManager(ctx, stderr)
	if m == nil {
		return status
	}
	defer closeManager(ctx, m, stderr)
	list, err := m.List(ctx)
	if err != nil {
		return failure(ctx, stderr, err)
	}
	if *asJSON {
		if list == nil {
			list = []session.Info{} // [] rather than null for no sessions
		}
		b, err := json.Marshal(list)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox: ls: encode: %s\n", oneLine(err))
			return exitSandbox
		}
		fmt.Fprintf(stdout, "%s\n", termsafe.JSON(b))
		return exitOK
	}
	writeTable(stdout, list, time.Now())
	return exitOK
}

// writeTable prints sessions as aligned columns.
func writeTable(w io.Writer, list []session.Info, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tID\tCONTAINER\tSTATE\tAGE\tIDLE\tMEMORY")
	for _, in := range list {
		key := in.Key
		if key == "" {
			key = "-" // its record is gone; the id still names it
		}
		state := in.State
		if in.PausedBy == session.PausedByIdle {
			state += " (idle)" // its next call resumes it
		}
		mem := "-"
		if in.MemoryBytes > 0 {
			mem = humanBytes(in.MemoryBytes)
		}
		// The sandbox's container can carry any labels and state text.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.Line(key), termsafe.Line(in.ID),
			termsafe.Line(shortContainer(in.ContainerID)), termsafe.Line(state),
			since(in.Created, now), since(in.LastUsed, now), mem)
	}
	tw.Flush()
}

// shortContainer is a container id as docker ps shows it.
func shortContainer(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// since is the time from t to now in its largest one or two units, such as
// 45s, 3m12s, 2h5m or 3d4h; "-" for an unknown time.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// humanBytes is n in binary units with one decimal: 512 B, 1.5 KiB, 230.4 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit && exp < 5; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
