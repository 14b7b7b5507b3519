package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
)

// BenchmarkPauseResume measures Manager.Pause and Manager.Resume of a
// session against the floor of the engine's own pause and unpause of a bare
// sandbox container of the same image and shape, interleaved. The Manager
// adds the database record that makes a pause visible to every process, and
// the look at the container that says what it is pausing.
func BenchmarkPauseResume(b *testing.B) {
	m := newManager(b, nil)
	cli := dockertest.Engine(b)
	bare := dockertest.Sandbox(b, nil)
	ctx := context.Background()
	mustExec(b, m, "k", "x = 1")
	var pauseFloor, resumeFloor, pause, resume samples
	timed := func(s *samples, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*s = append(*s, time.Since(start))
	}
	for range dockertest.Rounds(30, 2) {
		timed(&pauseFloor, func() error { return cli.PauseContainer(ctx, bare) })
		timed(&resumeFloor, func() error { return cli.UnpauseContainer(ctx, bare) })
		timed(&pause, func() error { return m.Pause(ctx, "k") })
		timed(&resume, func() error { return m.Resume(ctx, "k") })
	}
	if got := plain(mustExec(b, m, "k", "x")); got != "1" {
		b.Fatalf("state after %d pauses: x = %q", len(pause), got)
	}
	dockertest.Report(b, "pause-floor", "ms", pauseFloor, nil)
	dockertest.Report(b, "pause", "ms", pause, pauseFloor)
	dockertest.Report(b, "resume-floor", "ms", resumeFloor, nil)
	dockertest.Report(b, "resume", "ms", resume, resumeFloor)
}
