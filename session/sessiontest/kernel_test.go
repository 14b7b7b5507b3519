package sessiontest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// newContainer creates a running container on d.
func newContainer(t *testing.T, d *sessiontest.Driver) string {
	t.Helper()
	id, err := d.Create(context.Background(), session.Spec{Image: sessiontest.SandboxImage})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// dial connects a kernel client to container id.
func dial(t *testing.T, d *sessiontest.Driver, id string) *kernel.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rw, err := d.Connect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kernel.NewClient(ctx, rw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func execute(t *testing.T, c *kernel.Client, id, code string) *kernel.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Execute(ctx, kernel.ExecRequest{ID: id, Code: code}, nil)
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return res
}

func plainOf(res *kernel.Result) string {
	for _, o := range res.Outputs {
		if o.Kind == "execute_result" {
			return o.Data["text/plain"]
		}
	}
	return ""
}

// signal is closed by the first started event an Execute sees.
type signal struct {
	ch   chan struct{}
	once sync.Once
}

func startedSignal() *signal { return &signal{ch: make(chan struct{})} }

func (s *signal) see(e kernel.Event) {
	if e.Type == kernel.EventStarted {
		s.once.Do(func() { close(s.ch) })
	}
}

func TestLanguage(t *testing.T) {
	d := sessiontest.NewDriver()
	c := dial(t, d, newContainer(t, d))
	tests := []struct {
		code, stdout, plain, err string
	}{
		{code: "x = 40", stdout: "", plain: ""},
		{code: "x + 2", plain: "42"},
		{code: "x = x + 1; x", plain: "41"},
		{code: "2 + 3 * 4 - 1", plain: "13"},
		{code: "-5", plain: "-5"},
		{code: "s = 'ab'\ns * 2 + \"c\"", plain: "'ababc'"},
		{code: "print('hi; # there')\nprint(x)\nprint(hello world)", stdout: "hi; # there\n41\nhello world\n"},
		{code: "print(y)", err: "NameError: name 'y' is not defined"},
		{code: "y", err: "NameError: name 'y' is not defined"},
		{code: "s - 1", err: "TypeError: unsupported operand type(s) for -: 'str' and 'int'"},
		{code: "print('a')\nraise ValueError('bad')\nprint('b')", stdout: "a\n", err: "ValueError: bad"},
		{code: "raise KeyError", err: "KeyError: "},
		{code: "import time; time.sleep(0.01)  # a comment\nsleep(0)"},
		{code: "x\nx = 7", plain: ""},
		{code: "def f():\n    return 1\nf()\nx == 7"},
	}
	for _, tt := range tests {
		res := execute(t, c, "", tt.code)
		var gotErr string
		if res.Error != nil {
			gotErr = res.Error.Name + ": " + res.Error.Value
		}
		if res.Stdout != tt.stdout || plainOf(res) != tt.plain || gotErr != tt.err {
			t.Errorf("%q: stdout %q, plain %q, error %q; want %q, %q, %q", tt.code, res.Stdout, plainOf(res), gotErr, tt.stdout, tt.plain, tt.err)
		}
	}
}

func TestStateIsSharedByConnections(t *testing.T) {
	d := sessiontest.NewDriver()
	id := newContainer(t, d)
	c1 := dial(t, d, id)
	execute(t, c1, "", "x = 42")
	c2 := dial(t, d, id)
	if h := c2.Hello(); h.Protocol != kernel.ProtocolVersion || h.ExecutionCount != 1 || h.Busy {
		t.Fatalf("hello %+v", h)
	}
	res := execute(t, c2, "", "x")
	if plainOf(res) != "42" || res.ExecutionCount != 2 {
		t.Fatalf("second connection: %+v", res)
	}
	// Another container is another kernel.
	other := dial(t, d, newContainer(t, d))
	if res := execute(t, other, "", "x"); res.Error == nil || res.Error.Name != "NameError" || res.ExecutionCount != 1 {
		t.Fatalf("other container: %+v", res)
	}
	st, err := c1.Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []kernel.Variable{{Name: "x", Type: "int", Repr: "42"}}; !reflect.DeepEqual(st.Variables, want) {
		t.Fatalf("inspect: %+v", st)
	}
	if err := c2.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestExecutionIDs(t *testing.T) {
	d := sessiontest.NewDriver()
	id := newContainer(t, d)
	c1, c2 := dial(t, d, id), dial(t, d, id)
	first := execute(t, c1, "call-1", "print('once')")
	again := execute(t, c2, "call-1", "print('once')")
	if first.Replayed || !again.Replayed || again.Stdout != "once\n" || again.ExecutionCount != 1 {
		t.Fatalf("replay: first %+v, again %+v", first, again)
	}
	got, err := c2.Fetch(context.Background(), "call-1", nil)
	if err != nil || got.Stdout != "once\n" || !got.Replayed {
		t.Fatalf("fetch: %+v, %v", got, err)
	}
	_, err = c1.Execute(context.Background(), kernel.ExecRequest{ID: "call-1", Code: "print('twice')"}, nil)
	if !errors.Is(err, kernel.ErrIDConflict) {
		t.Fatalf("other code, same id: %v, want ErrIDConflict", err)
	}
	if _, err := c1.Fetch(context.Background(), "nope", nil); !errors.Is(err, kernel.ErrUnknownExecution) {
		t.Fatalf("fetch unknown: %v, want ErrUnknownExecution", err)
	}
	if res := execute(t, c1, "", "1"); res.ExecutionCount != 2 {
		t.Fatalf("replays took an execution count: %+v", res)
	}
}

func TestFetchWaitsForARunningExecution(t *testing.T) {
	d := sessiontest.NewDriver()
	id := newContainer(t, d)
	c1, c2 := dial(t, d, id), dial(t, d, id)
	done := make(chan *kernel.Result, 1)
	started := startedSignal()
	go func() {
		res, _ := c1.Execute(context.Background(), kernel.ExecRequest{ID: "slow", Code: "print('a')\nsleep(0.2)\nprint('b')"}, started.see)
		done <- res
	}()
	<-started.ch
	var events []string
	res, err := c2.Fetch(context.Background(), "slow", func(e kernel.Event) { events = append(events, string(e.Type)) })
	if err != nil || res.Stdout != "a\nb\n" {
		t.Fatalf("fetch: %+v, %v", res, err)
	}
	if (<-done).Stdout != "a\nb\n" {
		t.Fatal("the executing client got other output")
	}
	if strings.Join(events, ",") != "started,stream,stream" {
		t.Fatalf("events %v", events)
	}
}

func TestExecutionsRunOneAtATime(t *testing.T) {
	d := sessiontest.NewDriver()
	id := newContainer(t, d)
	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		c := dial(t, d, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			execute(t, c, "", "sleep(0.1)")
		}()
	}
	wg.Wait()
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("three sleeps of 0.1s took %s: they overlapped", el)
	}
}

func TestInterruptAndTimeout(t *testing.T) {
	d := sessiontest.NewDriver()
	id := newContainer(t, d)
	c := dial(t, d, id)
	res, err := c.Execute(context.Background(), kernel.ExecRequest{Code: "print('a')\nsleep(30)\nprint('b')", Timeout: 50 * time.Millisecond}, nil)
	if err != nil || !res.TimedOut || res.Interrupted || res.Error.Name != "KeyboardInterrupt" || res.Stdout != "a\n" {
		t.Fatalf("timeout: %+v, %v", res, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	res, err = c.Execute(ctx, kernel.ExecRequest{Code: "sleep(30)"}, nil)
	if err != nil || !res.Interrupted || res.TimedOut || res.Error.Name != "KeyboardInterrupt" {
		t.Fatalf("cancel: %+v, %v", res, err)
	}

	// An execution interrupted while queued finishes without running.
	c2 := dial(t, d, id)
	started := startedSignal()
	go c.Execute(context.Background(), kernel.ExecRequest{ID: "running", Code: "sleep(30)"}, started.see)
	<-started.ch
	stop := make(chan struct{})
	go func() {
		for {
			c.Interrupt(context.Background(), "queued") // until it is queued
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	res, err = c2.Execute(context.Background(), kernel.ExecRequest{ID: "queued", Code: "x = 1"}, nil)
	close(stop)
	if err != nil || !res.Interrupted || res.Error == nil || res.Error.Value != "interrupted before it started" {
		t.Fatalf("queued: %+v, %v", res, err)
	}
	c.Interrupt(context.Background(), "running")
	if res := execute(t, c2, "", "x"); res.Error == nil || res.Error.Name != "NameError" {
		t.Fatalf("the interrupted code ran: %+v", res)
	}
}

func TestKillBreaksStreams(t *testing.T) {
	d := sessiontest.NewDriver()
	id := newContainer(t, d)
	c := dial(t, d, id)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Execute(context.Background(), kernel.ExecRequest{Code: "sleep(30)"}, nil)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	d.Kill(id)
	if err := <-errc; !errors.Is(err, kernel.ErrConnectionLost) {
		t.Fatalf("execute during kill: %v, want ErrConnectionLost", err)
	}
	ct, err := d.Inspect(context.Background(), id)
	if err != nil || ct.Running || ct.Status != "exited" || ct.ExitCode != 137 {
		t.Fatalf("after kill: %+v, %v", ct, err)
	}
	if _, err := d.Connect(context.Background(), id); err == nil {
		t.Fatal("connected to a stopped container")
	}
	if n, err := d.MemoryUsage(context.Background(), id); n != 0 || err != nil {
		t.Fatalf("memory of a stopped container: %d, %v", n, err)
	}

	id2 := newContainer(t, d)
	c2 := dial(t, d, id2)
	d.RemoveBehindBack(id2)
	<-c2.Done()
	if _, err := d.Inspect(context.Background(), id2); !errors.Is(err, session.ErrContainerNotFound) {
		t.Fatalf("inspect after removal: %v", err)
	}
}

// TestReplayTranscript plays the golden transcript the Go client and the
// real init are tested with against the fake kernel, frame by frame.
func TestReplayTranscript(t *testing.T) {
	d := sessiontest.NewDriver()
	rw, err := d.Connect(context.Background(), newContainer(t, d))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	data, err := os.ReadFile("../../kernel/testdata/replay.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		dir  byte
		want map[string]any
	}
	var steps []step
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || line[0] == '#' || line[0] == '=' {
			continue
		}
		var want map[string]any
		if err := json.Unmarshal([]byte(line[2:]), &want); err != nil {
			t.Fatal(err)
		}
		// Chunks of one stream may arrive split or merged: compare merged.
		if n := len(steps); n > 0 && line[0] == '<' && want["type"] == "stream" {
			if last := steps[n-1].want; last["type"] == "stream" && last["name"] == want["name"] {
				last["text"] = last["text"].(string) + want["text"].(string)
				continue
			}
		}
		steps = append(steps, step{line[0], want})
	}
	r := bufio.NewReader(rw)
	req := 0
	for _, s := range steps {
		want := s.want
		if s.dir == '>' {
			req++
			want["req"] = strings.Repeat("r", req)
			out, _ := json.Marshal(want)
			if _, err := rw.Write(append(out, '\n')); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("waiting for %v: %v", want, err)
		}
		var frame map[string]any
		if err := json.Unmarshal(got, &frame); err != nil {
			t.Fatal(err)
		}
		if want["type"] == "hello" {
			// The fake runs no tools (the Manager takes the driver's
			// exec for files and commands then): its hello names none.
			delete(want, "tools")
		}
		if !matches(want, frame, strings.Repeat("r", req)) {
			t.Fatalf("frame\n got %s\nwant %v", got, want)
		}
	}
}

// matches reports whether got has exactly the fields of want ("$any"
// matches any value, "$req" the request tag).
func matches(want, got any, req string) bool {
	switch w := want.(type) {
	case string:
		return w == "$any" || w == "$req" && got == req || w == got
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, wv := range w {
			if gv, ok := g[k]; !ok || !matches(wv, gv, req) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(want, got)
}
