// Command benchreport runs the benchmarks behind the README's performance
// tables, one go test command per table, and rewrites each table between
// its markers (<!-- bench:name --> ... <!-- /bench -->) with the figures,
// the command, the date and the machine. A table whose benchmarks failed,
// were skipped or did not report a figure it needs is left as it was, with
// a warning. A table that needs a runtime the engine lacks, or an
// environment variable that is not set (Table.Needs), is skipped with the
// reason, and left as it was.
//
//	go run ./internal/benchreport            # make bench: measure, rewrite README.md
//	go run ./internal/benchreport -short     # make bench-short: every table once, smallest settings; README untouched
//	go run ./internal/benchreport -table kernel,serve
//	go run ./internal/benchreport -list      # the commands
//
// With -short every benchmark runs with -benchtime 1x -short (fewer rounds,
// smaller files): the exit status says whether each ran and reported every
// figure its table needs, not how fast.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, goTest, machine, engineHas)
	stop()
	os.Exit(code)
}

// runner runs a table's command and returns its output (the go test
// output, whatever the exit status) and its error.
type runner func(ctx context.Context, args []string, log io.Writer) ([]byte, error)

// goTest runs args, copying the output to log as it comes.
func goTest(ctx context.Context, args []string, log io.Writer) ([]byte, error) {
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout = io.MultiWriter(&buf, log)
	cmd.Stderr = cmd.Stdout
	err := cmd.Run()
	return buf.Bytes(), err
}

// hasRuntime reports whether the engine knows an OCI runtime by name.
type hasRuntime func(ctx context.Context, name string) (bool, error)

// engineHas asks the Docker engine for its runtimes.
func engineHas(ctx context.Context, name string) (bool, error) {
	out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{json .Runtimes}}").Output()
	if err != nil {
		return false, fmt.Errorf("docker info: %w", err)
	}
	var runtimes map[string]json.RawMessage
	if err := json.Unmarshal(out, &runtimes); err != nil {
		return false, fmt.Errorf("docker info: runtimes: %w", err)
	}
	_, ok := runtimes[name]
	return ok, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, test runner, host func(context.Context) string, has hasRuntime) int {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	readme := fs.String("readme", "README.md", "the file whose tables are rewritten")
	short := fs.Bool("short", false, "run every table once with the smallest settings and check its figures; write nothing")
	only := fs.String("table", "", "comma-separated tables to run (default: all)")
	list := fs.Bool("list", false, "print each table's command and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	tables := Tables()
	if *only != "" {
		var picked []Table
		for _, name := range strings.Split(*only, ",") {
			i := slices.IndexFunc(tables, func(t Table) bool { return t.Name == name })
			if i < 0 {
				fmt.Fprintf(stderr, "benchreport: no table %q\n", name)
				return 2
			}
			picked = append(picked, tables[i])
		}
		tables = picked
	}
	if *list {
		for _, t := range tables {
			fmt.Fprintf(stdout, "%s: %s\n", t.Name, t.Command(*short))
		}
		return 0
	}
	data, err := os.ReadFile(*readme)
	if err != nil {
		fmt.Fprintf(stderr, "benchreport: %v\n", err)
		return 1
	}
	doc := string(data)
	// Every marker is checked before minutes are spent measuring.
	for _, t := range tables {
		if _, _, _, err := Region(doc, t.Name); err != nil {
			fmt.Fprintf(stderr, "benchreport: %s: %v\n", *readme, err)
			return 1
		}
	}
	where := host(ctx)
	date := time.Now().UTC().Format("2006-01-02")
	var bad, skipped []string
	for _, t := range tables {
		// A table that compares a runtime the engine lacks cannot be
		// measured here: skipped with the reason, not a failure. Unsure
		// (the engine did not say) runs it, and its benchmarks say.
		if t.Runtime != "" {
			if ok, err := has(ctx, t.Runtime); err == nil && !ok {
				fmt.Fprintf(stderr, "\n=== %s: skipped: the engine has no %s runtime (register it as .ci/run does); %s left as it was\n", t.Name, t.Runtime, *readme)
				skipped = append(skipped, fmt.Sprintf("%s (no %s)", t.Name, t.Runtime))
				continue
			}
		}
		// So does one whose benchmarks need what was not given (source
		// that cannot be part of this repository).
		if n := t.Needs; n.Env != "" && os.Getenv(n.Env) == "" {
			fmt.Fprintf(stderr, "\n=== %s: skipped: %s is not set (%s); %s left as it was\n", t.Name, n.Env, n.What, *readme)
			skipped = append(skipped, fmt.Sprintf("%s (no %s)", t.Name, n.Env))
			continue
		}
		start := time.Now()
		fmt.Fprintf(stderr, "\n=== %s: %s\n", t.Name, t.Command(*short))
		out, runErr := test(ctx, t.Args(*short), stderr)
		took := time.Since(start).Round(time.Second)
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "benchreport: interrupted; %s left as it was\n", *readme)
			return 1
		}
		res, err := Parse(bytes.NewReader(out))
		if err != nil {
			runErr = errors.Join(runErr, err)
		}
		old, _, _, _ := Region(doc, t.Name)
		md, missing, kept := t.Render(res, old)
		var problems []string
		if runErr != nil {
			problems = append(problems, "go test: "+runErr.Error())
		}
		for _, f := range res.Failed {
			problems = append(problems, "failed: "+f)
		}
		problems = append(problems, missing...)
		var skips []string
		for _, s := range res.Skipped {
			skips = append(skips, "skipped: "+s)
		}
		if len(problems) > 0 {
			bad = append(bad, t.Name)
			fmt.Fprintf(stderr, "benchreport: warning: table %s (%s) left as it was:\n  %s\n", t.Name, took, strings.Join(append(problems, skips...), "\n  "))
			continue
		}
		for _, s := range skips { // a skip that cost no figure: an optional row's
			fmt.Fprintf(stderr, "benchreport: note: table %s: %s\n", t.Name, s)
		}
		fmt.Fprintf(stderr, "benchreport: table %s measured in %s\n", t.Name, took)
		if *short {
			continue
		}
		md += "\n" + footer(t, date, where, kept) + "\n"
		if doc, err = Splice(doc, t.Name, md); err != nil {
			fmt.Fprintf(stderr, "benchreport: %s: %v\n", *readme, err)
			return 1
		}
		// Written after every table, so that a later failure or an
		// interrupt keeps what was measured.
		if err := os.WriteFile(*readme, []byte(doc), 0o644); err != nil {
			fmt.Fprintf(stderr, "benchreport: %v\n", err)
			return 1
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "benchreport: %d of %d tables not measured: %s\n", len(bad), len(tables), strings.Join(bad, ", "))
		return 1
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "benchreport: %d of %d tables skipped: %s\n", len(skipped), len(tables), strings.Join(skipped, ", "))
	}
	if *short {
		fmt.Fprintf(stderr, "benchreport: all %d tables run reported every figure (short pass; %s not written)\n", len(tables)-len(skipped), *readme)
	}
	return 0
}

// footer is the line under a table: the command, the date, the machine,
// and the rows kept from an earlier run.
func footer(t Table, date, where string, kept []string) string {
	s := fmt.Sprintf("<sub>`%s`, %s, %s.", t.Command(false), date, where)
	for _, k := range kept {
		var env string
		for _, r := range t.Rows {
			if r.What == k {
				env = r.Optional
			}
		}
		s += fmt.Sprintf(" Row %q is from an earlier run (it runs with %s=1).", k, env)
	}
	return s + "</sub>"
}

// machine describes the host: CPU model, cores, Docker version.
func machine(ctx context.Context) string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		cpu = cpuModel(string(data))
	}
	docker := "Docker (version unknown)"
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").Output(); err == nil {
		docker = "Docker " + strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%s, %d cores, %s", cpu, runtime.NumCPU(), docker)
}

// cpuModel returns the first "model name" in /proc/cpuinfo's text.
func cpuModel(cpuinfo string) string {
	for _, line := range strings.Split(cpuinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "unknown CPU"
}
