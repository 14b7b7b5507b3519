package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// TestHelperManagerProcess is not a test: TestManagerKilledMidExecution runs
// the test binary again with it as a manager process to kill.
func TestHelperManagerProcess(t *testing.T) {
	raw := os.Getenv("AGENTBOX_TEST_MANAGER")
	if raw == "" {
		t.Skip("helper process for TestManagerKilledMidExecution")
	}
	var args struct {
		Config    config.Config
		Namespace string
		Key, ID   string
		Code      string
	}
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	m, err := session.NewManager(context.Background(), args.Config, session.WithNamespace(args.Namespace),
		session.WithLabels(map[string]string{dockertest.LabelTest: "TestManagerKilledMidExecution"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Exec(context.Background(), args.Key, args.Code, session.ExecID(args.ID), session.OnEvent(func(e kernel.Event) {
		if e.Type == kernel.EventStarted {
			fmt.Println("STARTED")
		}
		if e.Type == kernel.EventStream {
			for _, line := range strings.Split(strings.TrimSpace(e.Text), "\n") {
				fmt.Println("OUT " + line)
			}
		}
	}))
	t.Fatalf("the helper should have been killed; exec returned %v", err)
}

// TestManagerKilledMidExecution kills a manager process with SIGKILL while
// its code runs. A new manager fetches the result by execution id once the
// code finishes, and running the same id again replays it instead of running
// the code twice.
func TestManagerKilledMidExecution(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	code := "import time\ntime.sleep(2)\ncount = globals().get('count', 0) + 1\nprint('done', count)"
	// The test must clean up the helper's container even if it fails.
	m := managerFor(t, cfg, ns)
	killManagerAt(t, cfg, ns, "k", "call-1", code, func(l string) bool { return l == "STARTED" }, 0)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.Fetch(ctx, "k", "call-1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "done 1\n" {
		t.Fatalf("fetched result: %+v", res)
	}
	res, err = m.Exec(ctx, "k", code, session.ExecID("call-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Replayed || res.Stdout != "done 1\n" {
		t.Fatalf("same id ran again: %+v", res)
	}
	if _, err := m.Exec(ctx, "k", "other code", session.ExecID("call-1")); !errors.Is(err, kernel.ErrIDConflict) {
		t.Fatalf("same id, other code: %v, want ErrIDConflict", err)
	}
	if _, err := m.Fetch(ctx, "k", "never-ran"); !errors.Is(err, session.ErrUnknownExecution) {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestManySessionsAtOnce runs 20 sessions executing at once (under -race in
// make test).
func TestManySessionsAtOnce(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.MemoryMB = 256 })
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("s%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := m.Exec(ctx, key, fmt.Sprintf("v = %d\nprint(sum(range(10**5)) + v)", i))
			if err != nil {
				errs <- err
				return
			}
			if want := fmt.Sprint(4999950000 + i); strings.TrimSpace(res.Stdout) != want {
				errs <- fmt.Errorf("%s: got %q, want %s", key, res.Stdout, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n {
		t.Fatalf("want %d sessions, got %d", n, len(list))
	}
}
