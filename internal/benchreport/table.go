package main

import (
	"fmt"
	"slices"
	"strings"
)

// Table is one of the README's performance tables: the one command that
// measures it, and how its rows are made from that command's results.
type Table struct {
	Name      string   // its markers: <!-- bench:Name --> ... <!-- /bench -->
	Packages  []string // ./kernel
	Bench     string   // the -bench regexp
	Benchtime string   // the -benchtime
	Header    []string // column titles, the first the "what" column
	Rows      []Row
	// Runtime names the OCI runtime the table compares (runsc): on an
	// engine without it the table is skipped, with that reason.
	Runtime string
	// Needs is an environment variable the table's benchmarks cannot do
	// without: unset, the table is skipped with that reason.
	Needs Need
}

// Need is an environment variable a table needs, and what it gives.
type Need struct {
	Env  string // AGENTBOX_EXECD_SRC
	What string // "a checkout of OpenSandbox's components/execd to build execd from"
}

// Row is one line of a table: its first cell, and the others computed from
// the results.
type Row struct {
	What string
	// Optional names the environment variable that turns the row's
	// benchmark on; when it did not run, the row is kept as it was.
	Optional string
	Cells    func(g *Get) []string
}

// Args is the go test command line of the table (make bench-short adds
// -short and runs every table with -benchtime 1x).
func (t Table) Args(short bool) []string {
	bt := t.Benchtime
	if short {
		bt = "1x"
	}
	args := []string{"go", "test", "-p", "1", "-run", "^$", "-bench", t.Bench, "-benchtime", bt, "-timeout", "30m"}
	if short {
		args = append(args, "-short")
	}
	return append(args, t.Packages...)
}

// Command is Args as the README shows it, quoted for a shell.
func (t Table) Command(short bool) string {
	var q []string
	for _, a := range t.Args(short) {
		if a == "" || strings.ContainsAny(a, "^$|()*?[]{} '\"\\&;<>!#~`") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q = append(q, a)
	}
	return strings.Join(q, " ")
}

// Get looks metrics up in one run's results and remembers which it did not
// find.
type Get struct {
	out     Output
	missing []string
}

// V returns metric unit of the benchmark with key bench (see Key); a
// missing one is remembered, and 0 returned.
func (g *Get) V(bench, unit string) float64 {
	r, ok := g.out.Results[bench]
	if !ok {
		g.miss(bench + " (no result)")
		return 0
	}
	v, ok := r.Metrics[unit]
	if !ok {
		g.miss(bench + " " + unit)
	}
	return v
}

func (g *Get) miss(s string) {
	if !slices.Contains(g.missing, s) {
		g.missing = append(g.missing, s)
	}
}

// Render makes the table's Markdown from out; old is the region it
// replaces, whose rows an optional row that did not run keeps. It returns
// the metrics it missed in rows that are not optional (the table is then
// not to be written), and the rows kept from old.
func (t Table) Render(out Output, old string) (md string, missing, kept []string) {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.Header, " | ") + " |\n")
	b.WriteString(strings.Repeat("| --- ", len(t.Header)) + "|\n")
	oldRows := tableRows(old)
	for _, r := range t.Rows {
		g := &Get{out: out}
		cells := r.Cells(g)
		if len(g.missing) > 0 {
			if r.Optional != "" {
				if line, ok := oldRows[r.What]; ok {
					b.WriteString(line + "\n")
					kept = append(kept, r.What)
				}
				continue
			}
			for _, m := range g.missing {
				missing = append(missing, fmt.Sprintf("%q: %s", r.What, m))
			}
			continue
		}
		if len(cells) != len(t.Header)-1 {
			missing = append(missing, fmt.Sprintf("%q: %d cells for %d columns (a bug in its definition)", r.What, len(cells), len(t.Header)-1))
			continue
		}
		b.WriteString("| " + r.What + " |")
		for _, c := range cells {
			if c != "" {
				b.WriteString(" " + c)
			}
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	return b.String(), missing, kept
}
