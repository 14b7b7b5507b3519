package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/kernel"
)

// Folding of long texts: more than foldAt lines show the first and last
// foldKeep; lines longer than maxLine are cut.
const (
	foldAt   = 12
	foldKeep = 5
	maxLine  = 200
)

// timeLayout is how times are shown (local time).
const timeLayout = "2006-01-02 15:04:05"

// printer writes the text or JSON view.
type printer struct {
	w     io.Writer
	color bool
}

func newPrinter(w io.Writer) *printer {
	p := &printer{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("NO_COLOR") == "" {
			p.color = true
		}
	}
	return p
}

const (
	bold  = "1"
	dim   = "2"
	red   = "31"
	green = "32"
	cyan  = "36"
)

// styled is text ready for the terminal: escaped, perhaps with the
// printer's own colour codes around it. printf passes it through as it is;
// every plain string it escapes instead, since almost everything a session
// shows (keys, names, code, output, errors, even the records themselves in
// a BIND folder) may come from the sandbox.
type styled string

// paint escapes s as one line and colours it.
func (p *printer) paint(code, s string) styled { return p.colour(code, styled(termsafe.Line(s))) }

func (p *printer) colour(code string, s styled) styled {
	if !p.color || s == "" {
		return s
	}
	return "\x1b[" + styled(code) + "m" + s + "\x1b[0m"
}

// printf is fmt.Fprintf on the output with every string argument escaped
// as one line (termsafe.Line) and styled ones as they are.
func (p *printer) printf(format string, args ...any) { fmt.Fprintf(p.w, format, safeArgs(args)...) }

// tablef is printf for a row of t; escaping tabs too keeps the columns.
func (p *printer) tablef(t *tabwriter.Writer, format string, args ...any) {
	fmt.Fprintf(t, format, safeArgs(args)...)
}

func safeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			out[i] = termsafe.Line(a)
		case styled:
			out[i] = string(a)
		default:
			out[i] = a
		}
	}
	return out
}

func (p *printer) section(title string) { p.printf("\n%s\n", p.paint(bold, title)) }

func (p *printer) table() *tabwriter.Writer { return tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0) }

// jsonLine prints v as one line of JSON. Its strings say exactly what was
// recorded; termsafe.JSON only spells as \u escapes the characters JSON
// leaves raw that a terminal could act on (DEL, C1, bidi controls).
func (p *printer) jsonLine(v any) int {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return exitSystem
	}
	if _, err := p.w.Write(termsafe.JSON(b.Bytes())); err != nil {
		return exitSystem
	}
	return exitOK
}

// view prints one session.
func (p *printer) view(v *view, o options) int {
	v.Executions = nonNil(v.Executions)
	v.Datasets = nonNil(v.Datasets)
	if o.json {
		return p.jsonLine(v)
	}
	s := v.Session
	p.printf("%s %s\n", p.paint(bold, "session"), p.paint(cyan, s.Key))
	t := p.table()
	row := func(k, val string) {
		if val != "" {
			p.tablef(t, "  %s\t%s\n", k, val)
		}
	}
	row("id", s.ID)
	row("namespace", s.Namespace)
	row("folder", v.Dir)
	row("container", short(s.Container))
	row("image", s.Image)
	state := s.State
	if s.Stopped != nil {
		state += " at " + fmtTime(*s.Stopped)
		if s.StopReason != "" {
			state += " (" + s.StopReason + ")"
		}
	}
	row("state", state)
	row("storage", s.Storage)
	row("limits", fmtLimits(s.Limits))
	row("created", fmtTime(s.Created))
	row("last used", fmtTime(s.LastUsed))
	row("executions", fmt.Sprint(s.ExecutionCount))
	if s.MemoryBytes > 0 {
		row("memory", fmtBytes(s.MemoryBytes))
	}
	t.Flush()
	if v.Note != "" {
		p.printf("  %s\n", p.paint(red, "note: "+v.Note))
	}

	title := fmt.Sprintf("executions (%d", len(v.Executions))
	if s.ExecutionCount > len(v.Executions) {
		title += fmt.Sprintf(" of %d, newest last", s.ExecutionCount)
	}
	p.section(title + ")")
	if len(v.Executions) == 0 {
		p.printf("  none\n")
	}
	for _, e := range v.Executions {
		p.exec(e)
	}

	if !o.noState {
		src := ""
		if v.StateSource != "" {
			src = " (" + v.StateSource + ")"
		}
		p.section("python state" + src)
		p.state(v.State)
	}

	p.section("datasets")
	if len(v.Datasets) == 0 {
		p.printf("  none\n")
	} else {
		t := p.table()
		fmt.Fprintf(t, "  ID\tNAME\tSTATUS\tSIZE\tUPDATED\tREASON\n")
		for _, d := range v.Datasets {
			p.tablef(t, "  %s\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.Name, d.Status, fmtBytes(d.Size), fmtTime(d.Updated), orDash(oneLineText(d.Reason)))
		}
		t.Flush()
	}

	if !o.noArtifacts {
		p.section("artifacts")
		if len(v.Artifacts) == 0 {
			p.printf("  none\n")
		}
		for _, a := range v.Artifacts {
			p.printf("  %s  %s  %s\n", a.Name, fmtBytes(a.Size), a.MIME)
			if a.URL != "" {
				note := ""
				if a.Expires != nil {
					note = " (expires " + fmtTime(*a.Expires) + ")"
				} else if v.Source == "folder" {
					note = " (as recorded)"
				}
				p.printf("    %s%s\n", a.URL, p.paint(dim, note))
			}
		}
	}
	if len(v.Warnings) > 0 {
		p.section("warnings")
		for _, w := range v.Warnings {
			p.printf("  %s\n", p.paint(red, w))
		}
	}
	if o.follow {
		p.printf("\n%s\n", p.paint(dim, "following new executions (Ctrl-C to stop)…"))
	}
	return exitOK
}

// followed prints one execution found by --follow.
func (p *printer) followed(e execView, o options) {
	if o.json {
		p.jsonLine(e)
		return
	}
	p.exec(e)
}

func (p *printer) exec(e execView) {
	status := p.paint(green, "ok")
	switch {
	case e.TimedOut:
		status = p.paint(red, "timed out")
	case e.Interrupted:
		status = p.paint(red, "interrupted")
	case e.Error != nil:
		status = p.paint(red, e.Error.Name)
	}
	var flags styled
	if e.Replayed {
		flags += " replayed"
	}
	if e.StateLost {
		flags += " " + p.paint(red, "state lost")
	}
	p.printf("\n%s  %s  %s  %s  %s%s\n", p.paint(bold, fmt.Sprintf("[%d]", e.ExecutionCount)), e.ID,
		fmtTime(e.Started), fmtMS(e.DurationMS), status, flags)
	if e.TraceID != "" {
		// To look the execution up in a tracing backend.
		p.printf("  %s %s\n", p.paint(dim, "trace"), e.TraceID)
	}
	p.block("code", e.Code, "")
	p.block("stdout", e.Stdout, "")
	p.block("stderr", e.Stderr, red)
	for _, r := range e.Results {
		p.result(r)
	}
	if e.Error != nil {
		p.printf("  %s %s\n", p.paint(red, "error:"), oneLineText(e.Error.Name+": "+e.Error.Value))
		p.lines(strings.Join(e.Error.Traceback, "\n"), red)
	}
	for _, a := range e.Artifacts {
		p.printf("  artifact: %s  %s  %s\n", a.Name, fmtBytes(a.Size), a.MIME)
	}
}

// block prints a labelled text, folded.
func (p *printer) block(label, text, color string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	p.printf("  %s\n", p.paint(dim, label+":"))
	p.lines(text, color)
}

// lines prints text, folded, each line escaped with its tabs kept.
func (p *printer) lines(text, color string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	ls := strings.Split(text, "\n")
	show := func(l string) {
		l = strings.TrimRight(l, "\r")
		if r := []rune(l); len(r) > maxLine {
			l = string(r[:maxLine]) + "…"
		}
		out := styled(termsafe.String(l))
		if color != "" {
			out = p.colour(color, out)
		}
		p.printf("    %s\n", out)
	}
	if len(ls) <= foldAt {
		for _, l := range ls {
			show(l)
		}
		return
	}
	for _, l := range ls[:foldKeep] {
		show(l)
	}
	p.printf("    %s\n", p.paint(dim, fmt.Sprintf("… %d lines folded …", len(ls)-2*foldKeep)))
	for _, l := range ls[len(ls)-foldKeep:] {
		show(l)
	}
}

func (p *printer) state(st *kernel.State) {
	if st == nil {
		p.printf("  unavailable\n")
		return
	}
	if len(st.Variables) == 0 {
		p.printf("  no variables\n")
	} else {
		t := p.table()
		fmt.Fprintf(t, "  NAME\tTYPE\tSIZE\tSHAPE/LEN\tVALUE\n")
		for _, v := range st.Variables {
			size, shape := "", ""
			if v.Size != nil {
				size = fmtBytes(*v.Size)
			}
			if len(v.Shape) > 0 {
				parts := make([]string, len(v.Shape))
				for i, d := range v.Shape {
					parts[i] = fmt.Sprint(d)
				}
				shape = "(" + strings.Join(parts, ", ") + ")"
			} else if v.Len != nil {
				shape = fmt.Sprintf("len %d", *v.Len)
			}
			repr := oneLineText(v.Repr)
			if r := []rune(repr); len(r) > 60 {
				repr = string(r[:60]) + "…"
			}
			p.tablef(t, "  %s\t%s\t%s\t%s\t%s\n", v.Name, v.Type, size, shape, repr)
		}
		t.Flush()
	}
	if len(st.Modules) > 0 {
		mods := make([]string, len(st.Modules))
		for i, m := range st.Modules {
			mods[i] = m.Name
			if m.Module != m.Name {
				mods[i] += "=" + m.Module
			}
		}
		p.printf("  modules: %s\n", strings.Join(mods, " "))
	}
}

// list prints the session table.
func (p *printer) list(rows []listRow, o options) {
	if o.json {
		p.jsonLine(rows)
		return
	}
	if len(rows) == 0 {
		p.printf("no sessions\n")
		return
	}
	t := p.table()
	fmt.Fprintf(t, "KEY\tID\tSTATE\tCREATED\tLAST USED\tEXECUTIONS\tMEMORY\n")
	for _, r := range rows {
		mem := "-"
		if r.MemoryBytes > 0 {
			mem = fmtBytes(r.MemoryBytes)
		}
		p.tablef(t, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Key, r.ID, r.State, fmtTime(r.Created), fmtTime(r.LastUsed), r.ExecutionCount, mem)
	}
	t.Flush()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(timeLayout)
}

func fmtMS(ms float64) string {
	switch {
	case ms >= 60_000:
		return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
	case ms >= 1000:
		return fmt.Sprintf("%.2fs", ms/1000)
	}
	return fmt.Sprintf("%.1fms", ms)
}

func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func fmtLimits(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k, v := range l {
		if v != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, " ")
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func oneLineText(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
