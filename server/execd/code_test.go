package execd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func (e *env) runCode(t *testing.T, ctxID, code string) []*streamEvent {
	t.Helper()
	body := map[string]any{"code": code}
	if ctxID != "" {
		body["context"] = map[string]string{"id": ctxID, "language": "python"}
	}
	return newEvents(t, e.req("POST", "/code", jsonBody(body))).all()
}

// TestCodeContexts: state persists across /code calls of a context, in the
// one kernel every context of the sandbox shares; contexts are listed,
// got, deleted; errors are terminal error events.
func TestCodeContexts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var cc codeContext
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("POST", "/code/context", strings.NewReader(`{"language":"python"}`)), http.StatusOK)), &cc); err != nil {
		t.Fatal(err)
	}
	if cc.ID == "" || cc.Language != "python" {
		t.Fatalf("context %+v", cc)
	}
	if got := summary(e.runCode(t, cc.ID, "x = 41")); got != "init:"+cc.ID+" | execution_count:1 | execution_complete" {
		t.Errorf("assignment: %s", got)
	}
	evs := e.runCode(t, cc.ID, "print('a')\nprint('b', end='')\nimport sys; print('e', file=sys.stderr)\nx + 1")
	if got := summary(evs); got != "init:"+cc.ID+" | stdout:a\n | stdout:b | stderr:e\n | execution_count:2 | result:42 | execution_complete" {
		t.Errorf("use of x: %s", got)
	}
	evs = e.runCode(t, cc.ID, "1/0")
	last := evs[len(evs)-1]
	if last.Type != evError || last.Error.EName != "ZeroDivisionError" || len(last.Error.Traceback) == 0 {
		t.Errorf("exception: %s", summary(evs))
	}
	for _, ev := range evs {
		if ev.Type == evComplete {
			t.Errorf("execution_complete after an exception")
		}
	}
	// No context: the default one, same kernel.
	if got := summary(e.runCode(t, "", "x")); !strings.Contains(got, "init:"+defaultContext) || !strings.Contains(got, "result:41") {
		t.Errorf("default context: %s", got)
	}

	var list []codeContext
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/code/contexts?language=python", nil), http.StatusOK)), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != cc.ID || list[1].ID != defaultContext {
		t.Errorf("contexts %+v", list)
	}
	if body := wantStatus(t, e.req("GET", "/code/contexts?language=bash", nil), http.StatusOK); strings.TrimSpace(body) != "[]" {
		t.Errorf("bash contexts %s", body)
	}
	wantStatus(t, e.req("GET", "/code/contexts/"+cc.ID, nil), http.StatusOK)
	wantStatus(t, e.req("DELETE", "/code/contexts/"+cc.ID, nil), http.StatusOK)
	wantError(t, e.req("GET", "/code/contexts/"+cc.ID, nil), http.StatusNotFound, codeContextNotFound)
	wantError(t, e.req("DELETE", "/code/contexts/"+cc.ID, nil), http.StatusNotFound, codeContextNotFound)
	wantError(t, e.req("DELETE", "/code/contexts", nil), http.StatusBadRequest, codeMissingQuery)
	wantStatus(t, e.req("DELETE", "/code/contexts?language=python", nil), http.StatusOK)
	if body := wantStatus(t, e.req("GET", "/code/contexts?language=python", nil), http.StatusOK); strings.TrimSpace(body) != "[]" {
		t.Errorf("contexts after delete all: %s", body)
	}
	// Deleting contexts never resets the kernel.
	if got := summary(e.runCode(t, "", "x")); !strings.Contains(got, "result:41") {
		t.Errorf("after deleting contexts: %s", got)
	}
}

// TestCodeInterrupt: DELETE /code?id=<context> interrupts the running code
// with KeyboardInterrupt; variables defined before stay.
func TestCodeInterrupt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.runCode(t, "c1", "kept = 'yes'")
	s := newEvents(t, e.req("POST", "/code", strings.NewReader(`{"code":"import time\nprint('going', flush=True)\ntime.sleep(60)","context":{"id":"c1","language":"python"}}`)))
	for ev := s.next(); ev.Type != evStdout; ev = s.next() {
	}
	wantStatus(t, e.req("DELETE", "/code?id=c1", nil), http.StatusOK)
	evs := s.all()
	if last := evs[len(evs)-1]; last.Type != evError || last.Error.EName != "KeyboardInterrupt" {
		t.Errorf("after interrupt: %s", summary(evs))
	}
	if got := summary(e.runCode(t, "c1", "kept")); !strings.Contains(got, "result:'yes'") {
		t.Errorf("state after interrupt: %s", got)
	}
	wantError(t, e.req("DELETE", "/code?id=nope", nil), http.StatusNotFound, codeContextNotFound)
	wantError(t, e.req("DELETE", "/code", nil), http.StatusBadRequest, codeMissingQuery)
}

func TestCodeBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.MaxBodyBytes = 1024 })
	tests := []struct {
		name, route, body string
		status            int
		code              string
	}{
		{"malformed", "/code", `{"code":1}`, 400, codeInvalidRequest},
		{"empty code", "/code", `{"code":""}`, 400, codeInvalidRequest},
		{"other language", "/code", `{"code":"ls","context":{"language":"bash"}}`, 400, codeNotSupported},
		{"huge", "/code", `{"code":"` + strings.Repeat("1", 2048) + `"}`, 413, codeTooLarge},
		{"context other language", "/code/context", `{"language":"java"}`, 400, codeNotSupported},
		{"context malformed", "/code/context", `{`, 400, codeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, e.req("POST", tt.route, strings.NewReader(tt.body)), tt.status, tt.code)
		})
	}
}

// TestMetrics: the fields the SDK requires, from the session's limits and memory.
func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var m struct {
		CPUCount    *float64 `json:"cpu_count"`
		CPUUsedPct  *float64 `json:"cpu_used_pct"`
		MemTotalMiB *float64 `json:"mem_total_mib"`
		MemUsedMiB  *float64 `json:"mem_used_mib"`
		Timestamp   int64    `json:"timestamp"`
	}
	if err := json.Unmarshal([]byte(wantStatus(t, e.req("GET", "/metrics", nil), http.StatusOK)), &m); err != nil {
		t.Fatal(err)
	}
	if m.CPUCount == nil || *m.CPUCount <= 0 || m.MemTotalMiB == nil || *m.MemTotalMiB <= 0 || m.MemUsedMiB == nil || m.CPUUsedPct == nil || m.Timestamp < 1_600_000_000_000 {
		t.Errorf("metrics %+v", m)
	}
}
