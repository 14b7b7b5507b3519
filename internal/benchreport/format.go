package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The README's units: durations in µs, ms, s or "2 min 41 s", three
// significant digits; rates as whole numbers grouped by thousands with a
// space ("1 453 req/s"); ratios as "1.85×", "0.47×", "62×".

// sig3 formats x with three significant digits (no decimals from 100 on),
// trailing zeros dropped: 372, 16.7, 1.45, 2.6, 1.
func sig3(x float64) string {
	var s string
	switch a := math.Abs(x); {
	case a >= 99.95:
		return group(int64(math.Round(x)))
	case a >= 9.995:
		s = strconv.FormatFloat(x, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(x, 'f', 2, 64)
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// group writes n with its thousands separated by a space: 1 453, 12 325.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Dur formats d in the largest unit under which it reads below 1 000:
// 372 µs, 16.7 ms, 1.34 s, and from a minute on "2 min 41 s".
func Dur(d time.Duration) string {
	if d < 0 { // a difference of two timings can be
		return "-" + Dur(-d)
	}
	us := float64(d) / float64(time.Microsecond)
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case us < 999.5:
		return sig3(us) + " µs"
	case ms < 999.5:
		return sig3(ms) + " ms"
	case d < time.Minute-time.Second/2:
		return sig3(d.Seconds()) + " s"
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%d min %d s", int(d/time.Minute), int(d%time.Minute/time.Second))
}

// Us, Ms and Sec format a metric reported in µs, ms or s.
func Us(v float64) string  { return Dur(time.Duration(v * float64(time.Microsecond))) }
func Ms(v float64) string  { return Dur(time.Duration(v * float64(time.Millisecond))) }
func Sec(v float64) string { return Dur(time.Duration(v * float64(time.Second))) }

// Ratio formats a ratio: two decimals below 10, none from 10 on.
func Ratio(x float64) string {
	if math.Abs(x) >= 9.95 {
		return group(int64(math.Round(x))) + "×"
	}
	s := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(x, 'f', 2, 64), "0"), ".")
	return s + "×"
}

// Rate formats a rate (or any count) as a whole number with its unit:
// "1 453 req/s", "374 MiB/s".
func Rate(x float64, unit string) string {
	return group(int64(math.Round(x))) + " " + unit
}

// MiB formats a size in MiB with three significant digits: "25 MiB".
func MiB(x float64) string { return sig3(x) + " MiB" }
