package kernel_test

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
)

// echoFloor is the floor of the data path: a trivial Python echo reached over
// the same kind of stream (docker exec -i) as the kernel's bridge.
const echoFloor = `import os
while True:
    line = os.read(0, 1 << 16)
    if not line:
        break
    os.write(1, line)
`

type samples = dockertest.Samples

func report(b *testing.B, name string, s, floor samples) {
	dockertest.Report(b, name, "µs", s, floor)
}

// The benchmarks that start containers ignore b.N: each runs a fixed number
// of rounds (dockertest.Rounds, fewer under -short) and reports medians,
// p90s and ratios of its own. Run them with -benchtime 1x; make bench does.

// BenchmarkRoundTrip measures, interleaved on one container so that the
// machine's noise hits all alike: the echo floor, then `pass`, `x = x + 1` and
// a trailing expression through the kernel. Ratios to the floor are the figure
// that matters; absolute times vary with the machine's load.
func BenchmarkRoundTrip(b *testing.B) {
	cli := dockertest.Engine(b)
	id := dockertest.Sandbox(b, nil)
	c := dockertest.Dial(b, id)
	ctx := context.Background()
	stream, err := cli.Exec(ctx, id, "", []string{"python3", "-I", "-S", "-c", echoFloor})
	if err != nil {
		b.Fatal(err)
	}
	defer stream.Close()
	echo := bufio.NewReader(stream)
	exec := func(code string) time.Duration {
		start := time.Now()
		res, err := c.Execute(ctx, kernel.ExecRequest{Code: code}, nil)
		d := time.Since(start)
		if err != nil || res.Error != nil {
			b.Fatalf("%q: %v %+v", code, err, res)
		}
		return d
	}
	exec("x = 0")
	msg := []byte(`{"type":"execute","code":"pass"}` + "\n")
	var floor, pass, incr, expr samples
	warm := dockertest.Rounds(20, 1) // warm-up rounds, dropped
	for i := 0; i < warm+dockertest.Rounds(200, 2); i++ {
		start := time.Now()
		if _, err := stream.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := echo.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
		f := time.Since(start)
		p, x, e := exec("pass"), exec("x = x + 1"), exec("x")
		if i >= warm {
			floor, pass, incr, expr = append(floor, f), append(pass, p), append(incr, x), append(expr, e)
		}
	}
	report(b, "floor", floor, nil)
	report(b, "pass", pass, floor)
	report(b, "incr", incr, floor)
	report(b, "expr", expr, floor)
}

// BenchmarkRoundTripRuntimes measures `pass` through the kernel under runc
// and under gVisor (runsc) side by side, interleaved, against the same floor
// (the echo over docker exec -i into the runc container); the echo into the
// gVisor container is reported too, as the transport's own share. Skipped
// when the engine has no runsc.
func BenchmarkRoundTripRuntimes(b *testing.B) {
	if !dockertest.HasRuntime(b, "runsc") {
		b.Skip("the engine has no runsc runtime (.ci/run registers it)")
	}
	cli := dockertest.Engine(b)
	ctx := context.Background()
	type box struct {
		c    *kernel.Client
		echo *bufio.Reader
		send func([]byte)
	}
	open := func(runtime string) box {
		id := dockertest.Sandbox(b, func(s *docker.ContainerSpec) { s.Runtime = runtime })
		stream, err := cli.Exec(ctx, id, "", []string{"python3", "-I", "-S", "-c", echoFloor})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { stream.Close() })
		send := func(p []byte) {
			if _, err := stream.Write(p); err != nil {
				b.Fatal(err)
			}
		}
		return box{dockertest.Dial(b, id), bufio.NewReader(stream), send}
	}
	runc, runsc := open(""), open("runsc")
	msg := []byte(`{"type":"execute","code":"pass"}` + "\n")
	echo := func(x box) time.Duration {
		start := time.Now()
		x.send(msg)
		if _, err := x.echo.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	pass := func(x box) time.Duration {
		start := time.Now()
		res, err := x.c.Execute(ctx, kernel.ExecRequest{Code: "pass"}, nil)
		d := time.Since(start)
		if err != nil || res.Error != nil {
			b.Fatalf("pass: %v %+v", err, res)
		}
		return d
	}
	var floor, floorG, passR, passG samples
	warm := dockertest.Rounds(20, 1) // warm-up rounds, dropped
	for i := 0; i < warm+dockertest.Rounds(200, 2); i++ {
		f, fg, r, g := echo(runc), echo(runsc), pass(runc), pass(runsc)
		if i >= warm {
			floor, floorG, passR, passG = append(floor, f), append(floorG, fg), append(passR, r), append(passG, g)
		}
	}
	report(b, "floor", floor, nil)
	report(b, "floorRunsc", floorG, floor)
	report(b, "runc", passR, floor)
	report(b, "runsc", passG, floor)
	b.ReportMetric(float64(passG.Pct(0.5))/float64(passR.Pct(0.5)), "runsc/runc")
}

// BenchmarkOutput1MiB measures 1 MiB of stdout through the kernel (goal:
// under 20 ms), against the same megabyte through the echo floor.
func BenchmarkOutput1MiB(b *testing.B) {
	cli := dockertest.Engine(b)
	id := dockertest.Sandbox(b, nil)
	c := dockertest.Dial(b, id)
	ctx := context.Background()
	stream, err := cli.Exec(ctx, id, "", []string{"python3", "-I", "-S", "-c", echoFloor})
	if err != nil {
		b.Fatal(err)
	}
	defer stream.Close()
	echo := bufio.NewReaderSize(stream, 2<<20)
	payload := []byte(strings.Repeat("x", 1<<20-1) + "\n")
	code := "print('x' * (1024 * 1024 - 1))"
	var floor, out samples
	for i := 0; i < 3+dockertest.Rounds(50, 1); i++ { // 3 warm-up rounds
		start := time.Now()
		go stream.Write(payload)
		if _, err := echo.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
		f := time.Since(start)
		start = time.Now()
		res, err := c.Execute(ctx, kernel.ExecRequest{Code: code}, nil)
		d := time.Since(start)
		if err != nil || len(res.Stdout) != 1<<20 {
			b.Fatalf("%v, %d bytes", err, len(res.Stdout))
		}
		if i >= 3 {
			floor, out = append(floor, f), append(out, d)
		}
	}
	report(b, "floor1MiB", floor, nil)
	report(b, "out1MiB", out, floor)
}
