package execd

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCommandTranscripts pins what the SDK sees of foreground commands:
// one event per line without its terminator, a non-zero exit as an error
// event with the exit code and no execution_complete.
func TestCommandTranscripts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.h.newID = func() string { return "cmd-fixed" }
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"lines", map[string]any{"command": `printf 'a\nb\r\n\nc'`},
			"init:cmd-fixed | stdout:a | stdout:b | stdout: | stdout:c | execution_complete"},
		{"exit code", map[string]any{"command": "echo hi; exit 3"},
			"init:cmd-fixed | stdout:hi | error:CommandExecError=3"},
		{"stderr", map[string]any{"command": "echo oops >&2"},
			"init:cmd-fixed | stderr:oops | execution_complete"},
		{"cwd and env", map[string]any{"command": `echo "$PWD $GREETING"`, "cwd": "/tmp", "envs": map[string]string{"GREETING": "hello"}},
			"init:cmd-fixed | stdout:/tmp hello | execution_complete"},
		{"timeout", map[string]any{"command": "echo start; sleep 30", "timeout": 500},
			"init:cmd-fixed | stdout:start | error:CommandExecError=143"},
		{"missing cwd", map[string]any{"command": "true", "cwd": "/nowhere"},
			"init:cmd-fixed | error:CommandExecError="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := newEvents(t, e.req("POST", "/command", jsonBody(tt.body))).all()
			got := summary(evs)
			if tt.name == "missing cwd" {
				got = regexp.MustCompile(`=.*`).ReplaceAllString(got, "=")
			}
			if tt.name == "timeout" { // killed by SIGTERM or SIGKILL
				got = strings.Replace(got, "=137", "=143", 1)
			}
			if got != tt.want {
				t.Errorf("stream\n%s\nwant\n%s", got, tt.want)
			}
			last := evs[len(evs)-1]
			if last.Type == evComplete && last.ExecutionTime == nil {
				t.Errorf("execution_complete without execution_time: %s", last.raw)
			}
			if last.Type == evError && last.Error.Traceback == nil {
				t.Errorf("error without traceback: %s", last.raw)
			}
		})
	}
}

// TestCommandExactBytes pins the wire bytes of a failing command, with
// the timestamps and the id fixed.
func TestCommandExactBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) {
		o.Now = func() time.Time { return time.UnixMilli(1700000000000) }
		o.PingInterval = time.Hour
	})
	e.h.newID = func() string { return "c1" }
	body := wantStatus(t, e.req("POST", "/command", strings.NewReader(`{"command":"echo one; echo two; exit 7"}`)), http.StatusOK)
	want := `{"type":"init","text":"c1","timestamp":1700000000000}

{"type":"stdout","text":"one","timestamp":1700000000000}

{"type":"stdout","text":"two","timestamp":1700000000000}

{"type":"error","timestamp":1700000000000,"error":{"ename":"CommandExecError","evalue":"7","traceback":["exit status 7"]}}

`
	if body != want {
		t.Errorf("wire bytes\n%q\nwant\n%q", body, want)
	}
}

// TestCommandStreamsAsItRuns: lines arrive while the command still runs
// (its status says running when the first line is read), with pings
// between them.
func TestCommandStreamsAsItRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	s := newEvents(t, e.req("POST", "/command", strings.NewReader(`{"command":"for i in 1 2 3; do echo line$i; sleep 1; done"}`)))
	init := s.next()
	if init.Type != evInit || init.Text == nil {
		t.Fatalf("first event %s, want init with the id", init.raw)
	}
	id := *init.Text
	var first *streamEvent
	pings := 0
	for first == nil {
		ev := s.next()
		if ev == nil {
			t.Fatal("stream ended before any output")
		}
		if ev.Type == evPing {
			pings++
			continue
		}
		first = ev
	}
	if first.Type != evStdout || *first.Text != "line1" {
		t.Fatalf("first output %s", first.raw)
	}
	var st commandStatusResponse
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/command/status/"+id, nil), http.StatusOK)), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.ExitCode != nil || st.FinishedAt != nil {
		t.Errorf("status while the first line was read: %+v, want running", st)
	}
	var rest []*streamEvent
	for ev := s.next(); ev != nil; ev = s.next() {
		if ev.Type == evPing {
			pings++
			continue
		}
		rest = append(rest, ev)
	}
	if got := summary(rest); got != "stdout:line2 | stdout:line3 | execution_complete" {
		t.Errorf("rest of the stream: %s", got)
	}
	if pings == 0 {
		t.Errorf("no ping on a 3 s stream with a 200 ms ping interval")
	}
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/command/status/"+id, nil), http.StatusOK)), &st); err != nil {
		t.Fatal(err)
	}
	if st.Running || st.ExitCode == nil || *st.ExitCode != 0 || st.FinishedAt == nil || st.Content == "" {
		t.Errorf("status after: %+v", st)
	}
}

// TestForegroundInterrupt: DELETE /command?id= kills a streaming command.
func TestForegroundInterrupt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	s := newEvents(t, e.req("POST", "/command", strings.NewReader(`{"command":"echo started; sleep 60"}`)))
	id := *s.next().Text
	for ev := s.next(); ev.Type != evStdout; ev = s.next() {
	}
	wantStatus(t, e.req("DELETE", "/command?id="+id, nil), http.StatusOK)
	evs := s.all()
	if len(evs) != 1 || evs[0].Type != evError || evs[0].Error.EName != "CommandExecError" {
		t.Errorf("after interrupt: %s", summary(evs))
	}
}

// TestBackgroundCommand: start, status, logs by cursor, interrupt.
func TestBackgroundCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	evs := newEvents(t, e.req("POST", "/command", strings.NewReader(`{"command":"echo one; echo two >&2; sleep 1; echo three","background":true}`))).all()
	if len(evs) != 2 || evs[0].Type != evInit || evs[1].Type != evComplete {
		t.Fatalf("background stream: %s", summary(evs))
	}
	id := *evs[0].Text
	var st commandStatusResponse
	deadline := time.Now().Add(time.Minute)
	for {
		if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/command/status/"+id, nil), http.StatusOK)), &st); err != nil {
			t.Fatal(err)
		}
		if !st.Running || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Running || st.ExitCode == nil || *st.ExitCode != 0 || st.Content == "" || st.ID != id {
		t.Fatalf("status: %+v", st)
	}
	resp := e.req("GET", "/command/"+id+"/logs", nil)
	logs := wantStatus(t, resp, http.StatusOK)
	if logs != "one\ntwo\nthree\n" {
		t.Errorf("logs %q", logs)
	}
	if got := resp.Header.Get(CursorHeader); got != "14" {
		t.Errorf("cursor %q, want 14", got)
	}
	resp = e.req("GET", "/command/"+id+"/logs?cursor=8", nil)
	if logs := wantStatus(t, resp, http.StatusOK); logs != "three\n" || resp.Header.Get(CursorHeader) != "14" {
		t.Errorf("logs from 8: %q, cursor %q", logs, resp.Header.Get(CursorHeader))
	}
	wantError(t, e.req("GET", "/command/"+id+"/logs?cursor=-1", nil), http.StatusBadRequest, codeInvalidRequest)
	wantError(t, e.req("GET", "/command/"+id+"/logs?cursor=x", nil), http.StatusBadRequest, codeInvalidRequest)

	// Interrupt a long one.
	evs = newEvents(t, e.req("POST", "/command", strings.NewReader(`{"command":"sleep 300","background":true}`))).all()
	id = *evs[0].Text
	wantStatus(t, e.req("DELETE", "/command?id="+id, nil), http.StatusOK)
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/command/status/"+id, nil), http.StatusOK)), &st); err != nil {
		t.Fatal(err)
	}
	if st.Running || st.ExitCode == nil || *st.ExitCode == 0 || st.Error == "" {
		t.Errorf("status after interrupt: %+v", st)
	}
}

// TestCommandBadInput: OpenSandbox-shaped errors before any stream.
func TestCommandBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.MaxBodyBytes = 1024 })
	tests := []struct {
		name   string
		method string
		route  string
		body   string
		status int
		code   string
	}{
		{"malformed JSON", "POST", "/command", `{"command":`, 400, codeInvalidRequest},
		{"not an object", "POST", "/command", `[1]`, 400, codeInvalidRequest},
		{"two values", "POST", "/command", `{"command":"true"}{}`, 400, codeInvalidRequest},
		{"empty body", "POST", "/command", ``, 400, codeInvalidRequest},
		{"empty command", "POST", "/command", `{"command":"  "}`, 400, codeInvalidRequest},
		{"uid", "POST", "/command", `{"command":"id","uid":0}`, 400, codeNotSupported},
		{"negative timeout", "POST", "/command", `{"command":"true","timeout":-1}`, 400, codeInvalidRequest},
		{"huge body", "POST", "/command", `{"command":"` + strings.Repeat("x", 4096) + `"}`, 413, codeTooLarge},
		{"bad env name", "POST", "/command", `{"command":"true","envs":{"A B":"x"}}`, 200, ""},
		{"interrupt without id", "DELETE", "/command", ``, 400, codeMissingQuery},
		{"interrupt unknown", "DELETE", "/command?id=nope", ``, 404, codeCommandNotFound},
		{"status unknown", "GET", "/command/status/nope", ``, 404, codeCommandNotFound},
		{"logs unknown", "GET", "/command/nope/logs", ``, 404, codeCommandNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.req(tt.method, tt.route, strings.NewReader(tt.body))
			if tt.status == 200 { // refused by the Manager once streaming: an error event
				evs := newEvents(t, resp).all()
				if last := evs[len(evs)-1]; last.Type != evError || !strings.Contains(last.Error.EValue, "A B") {
					t.Errorf("stream %s", summary(evs))
				}
				return
			}
			wantError(t, resp, tt.status, tt.code)
		})
	}
}
