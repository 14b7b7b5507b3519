package session_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

func TestExecKeepsState(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	res := mustExec(t, m, "conv-1", "x = 41\nprint('hi')")
	if res.Stdout != "hi\n" || res.Error != nil || res.ExecutionCount != 1 || res.Session != "conv-1" {
		t.Fatalf("first result: %+v", res)
	}
	res = mustExec(t, m, "conv-1", "x + 1")
	if got := plain(res); got != "42" || res.ExecutionCount != 2 {
		t.Fatalf("second result: %q %+v", got, res)
	}
	res = mustExec(t, m, "conv-1", "1/0")
	if res.Error == nil || res.Error.Name != "ZeroDivisionError" {
		t.Fatalf("error result: %+v", res.Error)
	}
	// Another key is another kernel.
	res = mustExec(t, m, "conv-2", "'x' in globals()")
	if plain(res) != "False" {
		t.Fatalf("other session sees x: %+v", res)
	}
}

func TestConcurrentCallsOnANewKeyMakeOneContainer(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.Exec(context.Background(), "same", "import time; time.sleep(0.05)")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ExecutionCount != n || list[0].Key != "same" {
		t.Fatalf("want one session with %d executions, got %+v", n, list)
	}
}

func TestReattachFromANewManager(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	m1 := managerFor(t, cfg, ns)
	mustExec(t, m1, "k", "import math\ny = math.pi")
	if err := m1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Exec(context.Background(), "k", "y"); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("exec after close: %v, want ErrClosed", err)
	}
	m2 := managerFor(t, cfg, ns)
	res := mustExec(t, m2, "k", "round(y, 2)")
	if plain(res) != "3.14" || res.ExecutionCount != 2 || res.KernelRestarted {
		t.Fatalf("after reattach: %+v", res)
	}
}

// TestTimeoutKeepsState: a timeout interrupts the code with
// KeyboardInterrupt and variables defined before survive.
func TestTimeoutKeepsState(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	mustExec(t, m, "t", "x = 'kept'")
	res := mustExec(t, m, "t", "while True: pass", session.Timeout(time.Second))
	if !res.TimedOut || res.Error == nil || res.Error.Name != "KeyboardInterrupt" || res.StateLost {
		t.Fatalf("timeout result: %+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := m.Exec(ctx, "t", "import time\nwhile True: time.sleep(0.01)")
	if err != nil || !res.TimedOut || res.StateLost {
		t.Fatalf("context deadline: %v %+v", err, res)
	}
	if res := mustExec(t, m, "t", "x"); plain(res) != "'kept'" {
		t.Fatalf("state after timeouts: %+v", res)
	}
}

func TestCloseFailsEveryCall(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	mustExec(t, m, "c", "1")
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := map[string]error{}
	_, calls["Exec"] = m.Exec(ctx, "c", "1")
	_, calls["Fetch"] = m.Fetch(ctx, "c", "x")
	_, calls["Start"] = m.Start(ctx, "c")
	_, calls["List"] = m.List(ctx)
	_, calls["Inspect"] = m.Inspect(ctx, "c")
	calls["Stop"] = m.Stop(ctx, "c")
	_, calls["StopAll"] = m.StopAll(ctx)
	for name, err := range calls {
		if !errors.Is(err, session.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if err := m.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestStopDuringExecution: stopping a session while its code runs ends that
// execution with ErrSessionLost, and the key is free for a new session.
func TestStopDuringExecution(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := context.Background()
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		var once sync.Once
		_, err := m.Exec(ctx, "s", "import time\ntime.sleep(60)", session.OnEvent(func(e kernel.Event) {
			if e.Type == kernel.EventStarted {
				once.Do(func() { close(started) })
			}
		}))
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the code never started")
	}
	if err := m.Stop(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, session.ErrSessionLost) {
			t.Fatalf("execution in a stopped session: %v, want ErrSessionLost", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the execution did not end with its session")
	}
	if err := m.Stop(ctx, "s"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("second stop: %v, want ErrNotFound", err)
	}
	if res := mustExec(t, m, "s", "print('again')"); res.Stdout != "again\n" {
		t.Fatalf("new session after stop: %+v", res)
	}
}
