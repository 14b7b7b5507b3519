package dockertest

import (
	"slices"
	"testing"
	"time"
)

// Samples are the durations a benchmark measured, for medians and p90s
// (the figures the issues ask for, rather than Go's mean ns/op).
type Samples []time.Duration

// Pct returns the p-th quantile (0.5 the median).
func (s Samples) Pct(p float64) time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	return c[int(float64(len(c)-1)*p)]
}

// Report reports the median and p90 of s as name-med-<unit> and
// name-p90-<unit> (unit "µs" or "ms"), and with a floor measured in the same
// run, the ratio of the medians as name/floor.
func Report(b *testing.B, name, unit string, s, floor Samples) {
	div := float64(time.Millisecond)
	if unit == "µs" {
		div = float64(time.Microsecond)
	}
	b.ReportMetric(float64(s.Pct(0.5))/div, name+"-med-"+unit)
	b.ReportMetric(float64(s.Pct(0.9))/div, name+"-p90-"+unit)
	if floor != nil {
		b.ReportMetric(float64(s.Pct(0.5))/float64(floor.Pct(0.5)), name+"/floor")
	}
}

// Rounds is how many rounds a benchmark that starts containers runs. Such
// benchmarks ignore b.N (run them with -benchtime 1x) and report their own
// figures (Report) over a fixed number of rounds: full normally, short
// under -short, which is make bench-short's pass in CI: it checks that each
// benchmark still runs and reports its metrics, not how fast.
func Rounds(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}
