package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// runExec is `agentbox exec`: run code once and print what it produced.
func runExec(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("exec")
	key := fs.String("session", "default", "")
	id := fs.String("id", "", "")
	asJSON := fs.Bool("json", false, "")
	raw := fs.Bool("raw", false, "")
	quiet := fs.Bool("quiet", false, "")
	var timeout durationFlag
	fs.Var(&timeout, "timeout", "")
	env, labels := kvFlag{}, kvFlag{}
	fs.Var(env, "env", "")
	fs.Var(labels, "label", "")
	var ttl durationFlag
	fs.Var(&ttl, "ttl", "")
	onIdle := fs.String("on-idle", "", "")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	// With --json, stdout holds exactly one JSON object whatever happens:
	// the result, or what kept the code from running (the message also
	// printed on stderr).
	var said strings.Builder
	failed := func(status int) int {
		if *asJSON {
			writeFailureJSON(stdout, *key, *id, status, said.String())
		}
		return status
	}
	if *asJSON {
		stderr = io.MultiWriter(stderr, &said)
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "agentbox: exec: want one CODE argument, got %d (quote the code, or pass - to read it from standard input)\n", fs.NArg())
		return failed(exitUsage)
	}
	code := fs.Arg(0)
	if fs.NArg() == 0 || code == "-" {
		b, err := readAll(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox: exec: read standard input: %s\n", oneLine(err))
			return failed(exitUsage)
		}
		code = string(b)
	}
	if strings.TrimSpace(code) == "" {
		fmt.Fprintln(stderr, "agentbox: exec: no code to run (pass it as an argument, or on standard input with -)")
		return failed(exitUsage)
	}

	// Ctrl-C ends ctx: while the code runs, that interrupts it
	// (KeyboardInterrupt) and the result still prints; the session keeps its
	// state.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	m, status := openManager(ctx, stderr)
	if m == nil {
		return failed(status)
	}
	defer closeManager(ctx, m, stderr)

	var opts []session.ExecOption
	if *id != "" {
		opts = append(opts, session.ExecID(*id))
	}
	if timeout > 0 {
		opts = append(opts, session.Timeout(time.Duration(timeout)))
	}
	var create []session.StartOption
	if len(env) > 0 {
		create = append(create, session.Env(env))
	}
	if len(labels) > 0 {
		create = append(create, session.Labels(labels))
	}
	if ttl > 0 {
		create = append(create, session.TTL(time.Duration(ttl)))
	}
	if *onIdle != "" {
		create = append(create, session.OnIdle(config.IdleAction(strings.ToLower(*onIdle))))
	}
	opts = append(opts, session.CreateWith(create...))
	var p *printer
	if !*asJSON {
		p = newPrinter(stdout, stderr, *raw)
		p.quiet = *quiet
		opts = append(opts, session.OnEvent(p.event))
	}
	announceStart(ctx, m, *key, stderr)
	res, err := m.Exec(ctx, *key, code, opts...)
	if err != nil {
		return failed(failure(ctx, stderr, err))
	}
	if *asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox: exec: encode result: %s\n", oneLine(err))
			return failed(exitSandbox)
		}
		fmt.Fprintf(stdout, "%s\n", termsafe.JSON(b))
	} else {
		p.finish(res)
	}
	return resultStatus(res)
}

// resultStatus is the exit status of a finished execution: 1 when the code
// did not run to its end without raising. A timeout or an interrupt counts
// as raising: the code got KeyboardInterrupt.
func resultStatus(res *session.Result) int {
	if res.Error != nil || res.TimedOut || res.Interrupted {
		return exitFailed
	}
	return exitOK
}

// writeFailureJSON prints, for --json, the one JSON object of an execution
// that did not run: {"session": ..., "id": ... (when given), "error":
// {"kind": ..., "message": ...}}. kind is "usage" (exit 2), "sandbox" (3)
// or "interrupted" (130); message is what stderr said. A result's error
// (a Python exception) has a name instead of a kind.
func writeFailureJSON(w io.Writer, key, id string, status int, said string) {
	kind := map[int]string{exitUsage: "usage", exitSandbox: "sandbox", exitInterrupted: "interrupted"}[status]
	if kind == "" {
		kind = "failed"
	}
	var msgs []string
	for line := range strings.SplitSeq(said, "\n") {
		if line = strings.TrimPrefix(line, "agentbox: "); line != "" {
			msgs = append(msgs, line)
		}
	}
	type failure struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	b, err := json.Marshal(struct {
		Session string  `json:"session,omitempty"`
		ID      string  `json:"id,omitempty"`
		Error   failure `json:"error"`
	}{key, id, failure{kind, strings.Join(msgs, "; ")}})
	if err != nil { // strings only: cannot happen
		return
	}
	fmt.Fprintf(w, "%s\n", termsafe.JSON(b))
}

func readAll(r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	return io.ReadAll(r)
}

// durationFlag is --timeout: a Go duration (30s, 2m) or a number of
// seconds, more than zero.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return fmt.Errorf("want a duration such as 30s or 2m")
		}
		v = time.Duration(secs * float64(time.Second))
	}
	if v <= 0 {
		return fmt.Errorf("want a duration more than 0")
	}
	*d = durationFlag(v)
	return nil
}

// printer writes an execution's output as it streams, then whatever of the
// result did not stream (all of it for a replayed result, which has no
// events), then the error and notes on what happened to the kernel.
//
// The code's output is escaped (termsafe) unless raw: it is what the user
// asked to see, but the sandbox wrote it, and an escape sequence in it could
// set the clipboard or rewrite the screen of whoever reads it. Names and
// error text are always escaped.
type printer struct {
	stdout, stderr io.Writer // the terminal
	out, errOut    io.Writer // the code's stdout and stderr: stdout and stderr, escaped unless raw
	escapers       []*termsafe.Writer

	quiet bool // --quiet: no artifact lines

	mu       sync.Mutex // events arrive on the kernel connection's goroutine
	streamed map[string]bool
	displays int // rich results seen in events
	// held is the execute_result not printed yet: a returned matplotlib
	// figure is also sent as the PNG display that follows it, and printed
	// once, as that.
	held map[string]string
}

func newPrinter(stdout, stderr io.Writer, raw bool) *printer {
	p := &printer{stdout: stdout, stderr: stderr, out: stdout, errOut: stderr, streamed: map[string]bool{}}
	if !raw {
		o, e := termsafe.NewWriter(stdout), termsafe.NewWriter(stderr)
		p.out, p.errOut, p.escapers = o, e, []*termsafe.Writer{o, e}
	}
	return p
}

func (p *printer) event(ev kernel.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Type {
	case kernel.EventStream:
		p.release()
		w := p.out
		if ev.Name == "stderr" {
			w = p.errOut
		}
		io.WriteString(w, ev.Text)
		p.streamed[ev.Name] = true
	case kernel.EventDisplay:
		p.display(ev.Kind, ev.Data)
		p.displays++
	}
}

// display prints a rich result, holding back an execute_result until the
// next output shows whether it is a figure's.
func (p *printer) display(kind string, data map[string]string) {
	if p.held != nil {
		if _, png := data["image/png"]; png && isFigureRepr(p.held) {
			p.held = nil // the figure prints once, as its PNG display
		}
		p.release()
	}
	if kind == "execute_result" {
		p.held = data
		return
	}
	writeDisplay(p.out, kind, data)
}

// release prints the held execute_result, if any.
func (p *printer) release() {
	if p.held != nil {
		writeDisplay(p.out, "execute_result", p.held)
		p.held = nil
	}
}

// figureRE matches the repr of a matplotlib figure, such as
// "<Figure size 640x480 with 1 Axes>".
var figureRE = regexp.MustCompile(`^<(?:[\w.]+\.)?\w*Figure size [0-9.]+x[0-9.]+ with [0-9]+ Axes>$`)

// isFigureRepr reports whether a result is only a figure's repr.
func isFigureRepr(data map[string]string) bool {
	_, png := data["image/png"]
	return !png && figureRE.MatchString(data["text/plain"])
}

func (p *printer) finish(res *session.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.streamed["stdout"] {
		io.WriteString(p.out, res.Stdout)
	}
	if !p.streamed["stderr"] {
		io.WriteString(p.errOut, res.Stderr)
	}
	// Rich results come in the same order as their events, so the ones
	// not seen yet are the tail.
	for i := p.displays; i < len(res.Outputs); i++ {
		p.display(res.Outputs[i].Kind, res.Outputs[i].Data)
	}
	p.release()
	// A carriage return the output ended with is only known now not to
	// start a line end.
	for _, e := range p.escapers {
		e.Flush()
	}
	p.streamed = map[string]bool{}
	p.displays = 0
	if res.Error != nil {
		writeException(p.stderr, res.Error)
	}
	writeNotes(p.stderr, res, p.quiet)
}

// writeDisplay prints the text/plain form of a rich result, as a notebook
// would without a browser; a result without one is named by its types,
// escaped even in raw mode since they are names, not output.
func writeDisplay(w io.Writer, kind string, data map[string]string) {
	text, ok := data["text/plain"]
	if !ok {
		if kind == "" {
			kind = "display_data"
		}
		text = termsafe.Line(fmt.Sprintf("<%s: %s>", kind, strings.Join(slices.Sorted(maps.Keys(data)), ", ")))
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	io.WriteString(w, text)
}

// writeException prints a Python exception the way Python does: the
// traceback (whose last line is "Name: value") or, when the kernel gave no
// traceback (a timeout, a restarted kernel), the "Name: value" line alone.
func writeException(w io.Writer, e *kernel.Exception) {
	if len(e.Traceback) > 0 {
		for _, l := range e.Traceback {
			fmt.Fprintln(w, termsafe.String(l))
		}
		return
	}
	if e.Value == "" {
		fmt.Fprintln(w, termsafe.Line(e.Name))
		return
	}
	fmt.Fprintf(w, "%s: %s\n", termsafe.Line(e.Name), termsafe.String(e.Value))
}

// listedArtifacts is how many artifacts exec lists, one line (and a long
// URL) each, before it only counts the rest.
const listedArtifacts = 5

// writeNotes says on stderr what the result's flags mean, since a person
// reading the output cannot see them otherwise. quiet leaves out the
// artifacts.
func writeNotes(w io.Writer, res *session.Result, quiet bool) {
	if res.Replayed {
		fmt.Fprintf(w, "agentbox: replayed: execution %s already ran; this is its recorded result (the code did not run again)\n", termsafe.Line(res.ID))
	}
	if res.TimedOut {
		fmt.Fprintln(w, "agentbox: timed out: the code was interrupted")
	} else if res.Interrupted {
		fmt.Fprintln(w, "agentbox: interrupted")
	}
	if res.KernelRestarted {
		reason := res.RestartReason
		if reason == "" {
			reason = "no reason given"
		}
		fmt.Fprintf(w, "agentbox: the kernel restarted: %s\n", termsafe.Line(reason))
	}
	if res.StateLost {
		if res.RestartReason != "" && !res.KernelRestarted {
			fmt.Fprintf(w, "agentbox: state lost: %s\n", termsafe.Line(res.RestartReason))
		} else {
			fmt.Fprintln(w, "agentbox: state lost: variables and imports from before this execution are gone")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(res.Truncated)) {
		fmt.Fprintf(w, "agentbox: %s truncated: %s cut from the middle\n", termsafe.Line(name), humanBytes(res.Truncated[name]))
	}
	for i, a := range res.Artifacts {
		if quiet {
			break
		}
		if i == listedArtifacts && len(res.Artifacts) > listedArtifacts+1 {
			var size int64
			for _, rest := range res.Artifacts[i:] {
				size += rest.Size
			}
			fmt.Fprintf(w, "agentbox: %d more artifacts (%s; exec --json lists them with their URLs)\n", len(res.Artifacts)-i, humanBytes(size))
			break
		}
		fmt.Fprintf(w, "agentbox: artifact %s (%s): %s\n", termsafe.Line(a.Name), humanBytes(a.Size), termsafe.Line(a.URL))
	}
	for _, s := range res.SkippedArtifacts {
		fmt.Fprintf(w, "agentbox: not stored: %s: %s\n", termsafe.Line(s.Name), termsafe.Line(s.Reason))
	}
	for _, warn := range res.Warnings {
		fmt.Fprintf(w, "agentbox: warning: %s\n", termsafe.Line(warn))
	}
}
