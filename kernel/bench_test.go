package kernel_test

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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
	for i := 0; i < b.N+20; i++ { // 20 warm-up rounds are dropped
		start := time.Now()
		if _, err := stream.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := echo.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
		f := time.Since(start)
		p, x, e := exec("pass"), exec("x = x + 1"), exec("x")
		if i >= 20 {
			floor, pass, incr, expr = append(floor, f), append(pass, p), append(incr, x), append(expr, e)
		}
	}
	report(b, "floor", floor, nil)
	report(b, "pass", pass, floor)
	report(b, "incr", incr, floor)
	report(b, "expr", expr, floor)
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
	for i := 0; i < b.N+3; i++ {
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
	_ = fmt.Sprint()
}
