package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/session"
)

// killManagerAt runs code with execution id in a manager process of its own
// and kills it (SIGKILL) at the moment when(line) says, line being what the
// helper printed (STARTED, or OUT <a line of the code's output>).
func killManagerAt(t *testing.T, cfg config.Config, ns, key, id, code string, when func(line string) bool, delay time.Duration) {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"Config": cfg, "Namespace": ns, "Key": key, "ID": id, "Code": code})
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperManagerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "AGENTBOX_TEST_MANAGER="+string(args))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hit := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		closed := false
		for sc.Scan() {
			if !closed && when(sc.Text()) {
				close(hit)
				closed = true
			}
		}
	}()
	select {
	case <-hit:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("the manager process never reached the point to kill it at")
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// history returns the recorded executions of key with exec id.
func history(t *testing.T, cfg config.Config, ns, key, id string) int {
	t.Helper()
	s, err := store.Open(context.Background(), cfg.ArtifactsDB)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	list, err := s.Executions(context.Background(), ns, session.ID(key), 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list {
		if e.ExecID == id {
			n++
		}
	}
	return n
}

// TestKilledManagerLosesNothing kills the manager process (SIGKILL) while an
// execution that writes artifacts runs, and while the files of one that
// wrote 3 001 of them are being stored. A new process retrying the id gets
// the result without running the code again, the result is recorded once,
// every file is stored, and after 100 further executions the id still
// replays without running (the code counts its runs in /session). Before, the
// result was never recorded nor its files stored, and once the init's ring
// of 32 results forgot the id, the code ran a second time.
func TestKilledManagerLosesNothing(t *testing.T) {
	t.Parallel()
	const files = 3001
	code := fmt.Sprintf(`import os, time
n = int(open('/session/runs').read()) if os.path.exists('/session/runs') else 0
open('/session/runs', 'w').write(str(n + 1))
os.makedirs('/session/artifacts/out', exist_ok=True)
for i in range(%d):
    open('/session/artifacts/out/f%%04d.txt' %% i, 'w').write(str(i))
print('written', flush=True)
`, files)
	cases := []struct {
		name  string
		code  string
		when  func(string) bool
		delay time.Duration
	}{
		{"mid-execution", code + "time.sleep(3)\nprint('done')", func(l string) bool { return l == "OUT written" }, 0},
		{"mid-ingestion", code + "print('done')", func(l string) bool { return l == "OUT done" }, 30 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Not parallel: parallel subtests queue behind every test not
			// yet started, and would run last, at the tail of the package.
			cfg := testConfig(t, func(c *config.Config) { c.ArtifactMaxFiles = 5000 })
			ns := namespace()
			m := managerFor(t, cfg, ns)
			mustExec(t, m, "k", "x = 1") // the session exists before the kill
			killManagerAt(t, cfg, ns, "k", "call-1", c.code, c.when, c.delay)

			m2 := managerFor(t, cfg, ns)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := m2.Exec(ctx, "k", c.code, session.ExecID("call-1"))
			if err != nil {
				t.Fatal(err)
			}
			if !res.Replayed || !strings.Contains(res.Stdout, "done") {
				t.Fatalf("retry after the kill: %+v", res)
			}
			arts, err := m2.Artifacts(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			stored := 0
			for _, a := range arts {
				if strings.HasPrefix(a.Name, "out/f") {
					stored++
				}
			}
			if stored != files {
				t.Fatalf("%d of %d files stored after the kill", stored, files)
			}
			if n := history(t, cfg, ns, "k", "call-1"); n != 1 {
				t.Fatalf("the execution is recorded %d times, want once", n)
			}
			for i := range 100 {
				mustExec(t, m2, "k", fmt.Sprintf("y = %d", i))
			}
			res, err = m2.Exec(ctx, "k", c.code, session.ExecID("call-1"))
			if err != nil || !res.Replayed {
				t.Fatalf("after 100 executions: %+v, %v", res, err)
			}
			if runs := mustExec(t, m2, "k", "print(open('/session/runs').read())").Stdout; runs != "1\n" {
				t.Fatalf("the code ran %s times", strings.TrimSpace(runs))
			}
			// A third process agrees.
			m3 := managerFor(t, cfg, ns)
			if res, err := m3.Fetch(ctx, "k", "call-1"); err != nil || !strings.Contains(res.Stdout, "done") {
				t.Fatalf("fetch from a third process: %+v, %v", res, err)
			}
			if n := history(t, cfg, ns, "k", "call-1"); n != 1 {
				t.Fatalf("the execution is recorded %d times, want once", n)
			}
		})
	}
}

// TestLostWhileRunningIsUnknown: the container is removed while an
// execution id runs and its manager is killed. That id's answer is "outcome
// unknown", in every process, for good; it never runs, not even in the fresh
// session the key gets.
func TestLostWhileRunningIsUnknown(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	m := managerFor(t, cfg, ns)
	mustExec(t, m, "k", "x = 1")
	id := containerOf(t, m, "k")
	code := "import time\nprint('go', flush=True)\ntime.sleep(30)"
	killManagerAt(t, cfg, ns, "k", "call-1", code, func(l string) bool { return l == "OUT go" }, 0)
	if err := dockertest.Engine(t).RemoveContainer(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	m2 := managerFor(t, cfg, ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 3 {
		_, err := m2.Exec(ctx, "k", code, session.ExecID("call-1"))
		if !errors.Is(err, session.ErrOutcomeUnknown) {
			t.Fatalf("retry %d: %v, want ErrOutcomeUnknown", i, err)
		}
	}
	if _, err := m2.Fetch(ctx, "k", "call-1"); !errors.Is(err, session.ErrOutcomeUnknown) {
		t.Fatalf("fetch: %v, want ErrOutcomeUnknown", err)
	}
	res := mustExec(t, m2, "k", "'x' in globals()")
	if plain(res) != "False" {
		t.Fatalf("want a fresh session: %+v", res)
	}
	if _, err := m2.Exec(ctx, "k", code, session.ExecID("call-1")); !errors.Is(err, session.ErrOutcomeUnknown) {
		t.Fatalf("in the fresh session: %v, want ErrOutcomeUnknown", err)
	}
	if _, err := m2.Exec(ctx, "k", "other", session.ExecID("call-1")); !errors.Is(err, session.ErrOutcomeUnknown) && !strings.Contains(fmt.Sprint(err), "different code") {
		t.Fatalf("other code under the id: %v", err)
	}
}
