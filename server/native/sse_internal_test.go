package native

import (
	"encoding/json"
	"testing"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

func TestParseCursor(t *testing.T) {
	good := []struct {
		in   string
		want cursor
		done bool
	}{
		{"", cursor{}, false},
		{"done", cursor{}, true},
		{"0.0.0", cursor{}, false},
		{"12.3.4", cursor{12, 3, 4}, false},
		{" 5.0.1 ", cursor{5, 0, 1}, false},
	}
	for _, c := range good {
		got, done, ok := parseCursor(c.in)
		if !ok || got != c.want || done != c.done {
			t.Errorf("parseCursor(%q) = %v %v %v", c.in, got, done, ok)
		}
		if !c.done && c.in != "" && got.String() != c.want.String() {
			t.Errorf("String() %q", got.String())
		}
	}
	for _, in := range []string{"x", "1.2", "1.2.3.4", "-1.0.0", "01.0.0", "1.+2.3", "1..3", "99999999999999999999.0.0"} {
		if _, _, ok := parseCursor(in); ok {
			t.Errorf("parseCursor(%q) accepted", in)
		}
	}
}

// TestRunResume: a resumer gets exactly the events after its cursor, from
// the events kept and then from the result; events dropped for the
// memory cap come back from the result.
func TestRunResume(t *testing.T) {
	starts := 0
	rn := &run{max: 1 << 20, done: make(chan struct{}), changed: make(chan struct{}), onStart: func() { starts++ }}
	display := kernel.Event{Type: kernel.EventDisplay, Kind: "execute_result", Data: map[string]string{"text/plain": "2"}}
	rn.add(kernel.Event{Type: kernel.EventStarted})
	rn.add(kernel.Event{Type: kernel.EventStream, Name: "stdout", Text: "ab"})
	rn.add(kernel.Event{Type: kernel.EventStream, Name: "stderr", Text: "E"})
	// The Manager reconnects: the kernel replays the execution's events.
	rn.add(kernel.Event{Type: kernel.EventStarted})
	rn.add(kernel.Event{Type: kernel.EventStream, Name: "stdout", Text: "ab"})
	rn.add(kernel.Event{Type: kernel.EventStream, Name: "stderr", Text: "E"})
	rn.add(kernel.Event{Type: kernel.EventStream, Name: "stdout", Text: ""})
	rn.add(display)
	rn.add(kernel.Event{Type: kernel.EventStream, Name: "stdout", Text: "cd"})
	if starts != 1 {
		t.Fatalf("onStart called %d times, want once", starts)
	}
	evs, next, over, _ := rn.since(0)
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.name+"@"+e.cur.String())
	}
	want := []string{"stdout@2.0.0", "stderr@2.1.0", "display@2.1.1", "stdout@4.1.1"}
	if len(ids) != len(want) || next != 4 || over {
		t.Fatalf("events %v next %d over %v, want %v", ids, next, over, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("events %v, want %v", ids, want)
		}
	}
	res := &session.Result{Stdout: "abcd", Stderr: "E", Outputs: []kernel.Output{{Kind: "execute_result", Data: map[string]string{"text/plain": "2"}}}}
	for _, c := range []struct {
		from cursor
		want string
	}{
		{cursor{4, 1, 1}, ""},
		{cursor{2, 1, 1}, `stdout{"text":"cd"}`},
		{cursor{0, 0, 0}, `stdout{"text":"abcd"}stderr{"text":"E"}display{"kind":"execute_result","data":{"text/plain":"2"}}`},
		{cursor{99, 99, 99}, ""},
	} {
		got := ""
		for _, e := range rest(res, c.from) {
			got += e.name + string(e.data)
		}
		if got != c.want {
			t.Errorf("rest from %v: %s, want %s", c.from, got, c.want)
		}
	}
	// A cap that keeps one event: a late resumer starts at the newest.
	small := &run{max: 1, done: make(chan struct{}), changed: make(chan struct{})}
	for _, s := range []string{"a", "b", "c"} {
		small.add(kernel.Event{Type: kernel.EventStream, Name: "stdout", Text: s})
	}
	evs, next, _, _ = small.since(0)
	if len(evs) != 1 || next != 3 || evs[0].cur != (cursor{3, 0, 0}) {
		t.Fatalf("capped run kept %+v (next %d)", evs, next)
	}
	var d textEvent
	if err := json.Unmarshal(evs[0].data, &d); err != nil || d.Text != "c" {
		t.Fatalf("kept %s", evs[0].data)
	}
}
