package main

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Result is one benchmark's result line: its iterations and the value/unit
// pairs after them (ns/op, and the metrics it reported itself).
type Result struct {
	Key     string // Key(pkg, name)
	N       int64
	Metrics map[string]float64
}

// Output is what Parse found in one `go test -bench` run.
type Output struct {
	Results map[string]Result // by Key
	Skipped []string          // keys of skipped benchmarks, with the reason when given
	Failed  []string          // keys of failed benchmarks
}

// Key names a benchmark across packages: the package's last path element,
// a dot, and the benchmark's name without "Benchmark" and without the
// -GOMAXPROCS suffix the testing package adds: "kernel.RoundTrip",
// "session.FileWrite/1KiB", "artifacts.Download/4KiB-sqlite".
func Key(pkg, name string) string {
	name = strings.TrimPrefix(name, "Benchmark")
	name = procsSuffix.ReplaceAllString(name, "")
	return path.Base(pkg) + "." + name
}

var (
	procsSuffix = regexp.MustCompile(`-\d+$`)
	pkgLine     = regexp.MustCompile(`^pkg: (\S+)`)
	statusLine  = regexp.MustCompile(`(?:^|\s)--- (SKIP|FAIL): (Benchmark\S+)`)
	// A result line: the name, then (after any log output the benchmark
	// printed between its name and its figures) the iterations and pairs.
	nameLine = regexp.MustCompile(`^(Benchmark\S+)(?:\s+(.*))?$`)
	iterLine = regexp.MustCompile(`^\s*(\d+)\s+(.+)$`)
)

// Parse reads the output of `go test -run '^$' -bench ...` (one package or
// several, run one after the other) and returns every result line, keyed by
// Key, and the benchmarks reported skipped or failed. A name printed alone
// (the benchmark logged something before its figures) is paired with the
// next line that holds iterations and value/unit pairs.
func Parse(r io.Reader) (Output, error) {
	out := Output{Results: map[string]Result{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	pkg, pending := "", ""
	lastSkip := -1 // index in out.Skipped of a skip whose reason may follow
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := pkgLine.FindStringSubmatch(line); m != nil {
			pkg, pending, lastSkip = m[1], "", -1
			continue
		}
		if m := statusLine.FindStringSubmatch(line); m != nil {
			k := Key(pkg, m[2])
			if m[1] == "SKIP" {
				out.Skipped = append(out.Skipped, k)
				lastSkip = len(out.Skipped) - 1
			} else {
				out.Failed = append(out.Failed, k)
				lastSkip = -1
			}
			continue
		}
		if lastSkip >= 0 && strings.HasPrefix(line, "    ") {
			reason := strings.TrimSpace(line)
			if _, after, ok := strings.Cut(reason, ": "); ok { // drop "file.go:12: "
				reason = after
			}
			out.Skipped[lastSkip] += ": " + reason
			lastSkip = -1
			continue
		}
		lastSkip = -1
		if m := nameLine.FindStringSubmatch(line); m != nil {
			if n, pairs, ok := iterations(m[2]); ok {
				out.Results[Key(pkg, m[1])] = Result{Key: Key(pkg, m[1]), N: n, Metrics: pairs}
				pending = ""
			} else {
				pending = m[1]
			}
			continue
		}
		if pending != "" {
			if n, pairs, ok := iterations(line); ok {
				out.Results[Key(pkg, pending)] = Result{Key: Key(pkg, pending), N: n, Metrics: pairs}
				pending = ""
			}
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("reading benchmark output: %w", err)
	}
	return out, nil
}

// iterations parses "<n> <value> <unit> <value> <unit>...".
func iterations(s string) (int64, map[string]float64, bool) {
	m := iterLine.FindStringSubmatch(s)
	if m == nil {
		return 0, nil, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, nil, false
	}
	f := strings.Fields(m[2])
	if len(f) == 0 || len(f)%2 != 0 {
		return 0, nil, false
	}
	pairs := make(map[string]float64, len(f)/2)
	for i := 0; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0, nil, false
		}
		pairs[f[i+1]] = v
	}
	return n, pairs, true
}
