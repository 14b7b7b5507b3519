package session_test

import (
	"context"
	"io"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// BenchmarkShellRoundTrip measures Run("true") against floors on the same
// container, interleaved: a fork and exec of `true` timed inside the
// container (by the kernel, as the sandbox user: what any way of running
// a command there pays), the engine's own exec of `true` through its API
// (create, attach, run, read to the end: what docker exec does, and what
// Run was built on before the channel), and the docker command itself
// (`docker exec ID true`, which adds the CLI's own start).
func BenchmarkShellRoundTrip(b *testing.B) {
	m := newManager(b, nil)
	ctx := context.Background()
	info, err := m.Start(ctx, "rt")
	if err != nil {
		b.Fatal(err)
	}
	cli := dockertest.Engine(b)
	mustExec(b, m, "rt", dockertest.ForkTrue)
	var api, cliFloor, run, inside samples
	warm := dockertest.Rounds(10, 1) // warm-up rounds, dropped
	for i := 0; i < warm+dockertest.Rounds(50, 2); i++ {
		start := time.Now()
		s, err := cli.Exec(ctx, info.ContainerID, "1000", []string{"true"})
		if err != nil {
			b.Fatal(err)
		}
		s.CloseWrite()
		io.Copy(io.Discard, s)
		s.Close()
		a := time.Since(start)

		start = time.Now()
		if out, err := exec.Command("docker", "exec", "-u", "1000", info.ContainerID, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v %s", err, out)
		}
		c := time.Since(start)

		start = time.Now()
		res, err := m.Run(ctx, "rt", session.Command{Line: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
		r := time.Since(start)

		res2 := mustExec(b, m, "rt", "_fork_true()")
		in, err := strconv.ParseFloat(plain(res2), 64)
		if err != nil {
			b.Fatalf("the in-container floor: %q", plain(res2))
		}
		if i >= warm {
			api, cliFloor, run = append(api, a), append(cliFloor, c), append(run, r)
			inside = append(inside, time.Duration(in*float64(time.Second)))
		}
	}
	report(b, "in-container", inside, nil)
	report(b, "engine-exec", api, nil)
	report(b, "docker-exec-cli", cliFloor, nil)
	report(b, "run", run, inside)
	b.ReportMetric(float64(run.Pct(0.5))/float64(api.Pct(0.5)), "run/engine-exec")
	b.ReportMetric(float64(run.Pct(0.5))/float64(cliFloor.Pct(0.5)), "run/docker-exec-cli")
}
