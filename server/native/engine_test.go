package native_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

const sess = "/v1/agentbox/sessions/"

// gateCode prints first, waits for /session/gate (written from outside
// through the files API), then prints second: an execution the test holds
// mid-run for as long as it needs, with no timing involved.
func gateCode(first, second string) string {
	return "import os, time\nprint(" + quote(first) + ", flush=True)\n" +
		"while not os.path.exists('/session/gate'):\n    time.sleep(0.02)\n" +
		"os.remove('/session/gate')\nprint(" + quote(second) + ", flush=True)\n"
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func openGate(t *testing.T, e *env, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.m.WriteFile(ctx, key, "/session/gate", strings.NewReader("go"), 0); err != nil {
		t.Fatalf("open gate: %v", err)
	}
}

// TestRoutes covers every route on one session: executions with exactly-once
// ids, fetch by id, info, artifacts with signed URLs, datasets, stop.
func TestRoutes(t *testing.T) {
	fetcher := datasets.BytesFetcher(func(_ context.Context, r datasets.Request) ([]byte, error) {
		if r.ID == "sales" {
			return []byte("region,amount\nnorth,3\n"), nil
		}
		return nil, errors.New("no such dataset at the source")
	})
	e := newEnv(t, nil, func(c *config.Config) { c.DatasetAccess = config.AccessAPI }, session.WithFetcher(fetcher))
	const name = "conv-1"
	p := sess + name

	t.Run("exactly once", func(t *testing.T) {
		counter := "n = globals().get('n', 0) + 1\nprint(n)"
		resp, b := e.do(t, req{method: "POST", path: p + "/executions", body: execBody(counter, "call-1"),
			header: map[string]string{"X-Request-ID": "rq-42"}})
		var first execution
		expect(t, resp, b, 200, &first)
		if first.Stdout != "1\n" || first.Replayed || first.ID != "call-1" || first.Session != name || first.Status != "completed" {
			t.Fatalf("first run: %s", b)
		}
		if got := resp.Header.Get("X-Request-ID"); got != "rq-42" {
			t.Errorf("X-Request-ID %q, want the request's rq-42", got)
		}
		if got := resp.Header.Get("Location"); got != p+"/executions/call-1" {
			t.Errorf("Location %q", got)
		}
		resp, b = e.do(t, req{method: "POST", path: p + "/executions", body: execBody(counter, "call-1")})
		var again execution
		expect(t, resp, b, 200, &again)
		if again.Stdout != "1\n" || !again.Replayed || again.ExecutionCount != first.ExecutionCount {
			t.Fatalf("the same id again: %s; want the first result replayed", b)
		}
		if resp.Header.Get("X-Request-ID") == "" {
			t.Error("no X-Request-ID made up for a request without one")
		}
		// The counter in the kernel proves the code ran once.
		resp, b = e.do(t, req{method: "POST", path: p + "/executions", body: execBody("print(n)", "")})
		var check execution
		expect(t, resp, b, 200, &check)
		if check.Stdout != "1\n" {
			t.Fatalf("n is %q after the same id twice, want 1", check.Stdout)
		}
		resp, b = e.do(t, req{method: "POST", path: p + "/executions", body: execBody("n = 100", "call-1")})
		expectError(t, resp, b, http.StatusConflict, "id_conflict")
	})

	t.Run("fetch by id", func(t *testing.T) {
		resp, b := e.do(t, req{method: "GET", path: p + "/executions/call-1"})
		var x execution
		expect(t, resp, b, 200, &x)
		if x.Stdout != "1\n" || x.ID != "call-1" || x.Session != name {
			t.Fatalf("fetched %s", b)
		}
		resp, b = e.do(t, req{method: "GET", path: p + "/executions/never-ran"})
		expectError(t, resp, b, 404, "execution_not_found")
	})

	t.Run("python error is data", func(t *testing.T) {
		resp, b := e.do(t, req{method: "POST", path: p + "/executions", body: `{"code": "1/0", "timeout_s": 30}`})
		var x execution
		expect(t, resp, b, 200, &x)
		if x.Error == nil || x.Error.Name != "ZeroDivisionError" {
			t.Fatalf("1/0 gave %s", b)
		}
		resp, b = e.do(t, req{method: "POST", path: p + "/executions", body: `{"code": "6*7"}`})
		expect(t, resp, b, 200, &x)
		if len(x.Results) != 1 || x.Results[0]["text/plain"] != "42" {
			t.Fatalf("6*7 gave %s", b)
		}
	})

	t.Run("artifacts with signed URLs", func(t *testing.T) {
		code := "import os\nos.makedirs('/session/artifacts', exist_ok=True)\n" +
			"open('/session/artifacts/report.txt', 'w').write('quarterly numbers')"
		resp, b := e.do(t, req{method: "POST", path: p + "/executions", body: execBody(code, "write-report")})
		var x execution
		expect(t, resp, b, 200, &x)
		if len(x.Artifacts) != 1 || x.Artifacts[0].Name != "report.txt" || x.Artifacts[0].URL == "" {
			t.Fatalf("the execution's artifacts: %s", b)
		}
		resp, b = e.do(t, req{method: "GET", path: p + "/artifacts"})
		var list struct{ Artifacts []session.Artifact }
		expect(t, resp, b, 200, &list)
		var found *session.Artifact
		for i, a := range list.Artifacts {
			if a.Name == "report.txt" {
				found = &list.Artifacts[i]
			}
		}
		if found == nil || !strings.HasPrefix(found.URL, e.url+"/artifacts/") || !strings.Contains(found.URL, "token=") {
			t.Fatalf("artifacts %s: want report.txt with a signed URL on %s", b, e.url)
		}
		resp, b = doURL(t, found.URL, req{method: "GET"})
		if resp.StatusCode != 200 || string(b) != "quarterly numbers" {
			t.Fatalf("download: %d %q", resp.StatusCode, b)
		}
		// The token is what opens it.
		resp, _ = doURL(t, strings.Split(found.URL, "?")[0], req{method: "GET"})
		if resp.StatusCode == 200 {
			t.Fatal("the download URL without its token served the file")
		}
	})

	t.Run("datasets", func(t *testing.T) {
		resp, b := e.do(t, req{method: "POST", path: p + "/datasets/sales/select"})
		var st struct {
			DatasetID    string `json:"dataset_id"`
			Path, Status string
			Fetched      *bool
		}
		expect(t, resp, b, 200, &st)
		if st.DatasetID != "sales" || st.Status != "LOADED" || st.Fetched == nil || !*st.Fetched || !strings.HasPrefix(st.Path, "/session/data/") {
			t.Fatalf("select: %s", b)
		}
		resp, b = e.do(t, req{method: "POST", path: p + "/executions", body: execBody("print(open("+quote(st.Path)+").read())", "")})
		var x execution
		expect(t, resp, b, 200, &x)
		if !strings.Contains(x.Stdout, "north,3") {
			t.Fatalf("the selected dataset reads %q", x.Stdout)
		}
		resp, b = e.do(t, req{method: "POST", path: p + "/datasets/missing/select", body: `{"refresh": true}`})
		expect(t, resp, b, 200, &st)
		if st.Status != "FAILED" {
			t.Fatalf("a dataset the source lacks: %s", b)
		}
		resp, b = e.do(t, req{method: "GET", path: p + "/datasets"})
		var l struct {
			Access   string
			Files    []struct{ Name, Path, Source, Format string }
			Selected []struct {
				DatasetID      string `json:"dataset_id"`
				Status, Reason string
			} `json:"selected"`
		}
		expect(t, resp, b, 200, &l)
		if l.Access != "API" || len(l.Files) != 1 || l.Files[0].Path != st.Path && l.Files[0].Source != "api" {
			t.Fatalf("datasets: %s", b)
		}
		statuses := map[string]string{}
		for _, s := range l.Selected {
			statuses[s.DatasetID] = s.Status
		}
		if statuses["sales"] != "LOADED" || statuses["missing"] != "FAILED" {
			t.Fatalf("selected datasets %v in %s", statuses, b)
		}
	})

	t.Run("info and stop", func(t *testing.T) {
		resp, b := e.do(t, req{method: "GET", path: p})
		var info struct {
			Name, State    string
			ExecutionCount int `json:"execution_count"`
			Key            string
		}
		expect(t, resp, b, 200, &info)
		if info.Name != name || info.State != "running" || info.ExecutionCount < 4 || info.Key != "" {
			t.Fatalf("info: %s", b)
		}
		if strings.Contains(string(b), tenant.Local.SessionKey(name)) {
			t.Fatalf("info shows the tenant's session key: %s", b)
		}
		resp, b = e.do(t, req{method: "DELETE", path: p})
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", resp.StatusCode, b)
		}
		resp, b = e.do(t, req{method: "GET", path: p})
		expect(t, resp, b, 200, &info)
		if info.State != "stopped" {
			t.Fatalf("after DELETE: %s", b)
		}
		// The history outlives the session.
		resp, b = e.do(t, req{method: "GET", path: p + "/executions/call-1"})
		var x execution
		expect(t, resp, b, 200, &x)
		if x.Stdout != "1\n" {
			t.Fatalf("call-1 after stop: %s", b)
		}
	})

	t.Run("unknown session", func(t *testing.T) {
		for _, r := range []req{
			{method: "GET", path: sess + "nobody"},
			{method: "DELETE", path: sess + "nobody"},
			{method: "GET", path: sess + "nobody/artifacts"},
			{method: "GET", path: sess + "nobody/datasets"},
		} {
			resp, b := e.do(t, r)
			expectError(t, resp, b, 404, "session_not_found")
		}
		resp, b := e.do(t, req{method: "GET", path: sess + "nobody/executions/call-1"})
		expectError(t, resp, b, 404, "execution_not_found")
	})
}

// TestFetchAfterClientLeft: a client that goes away mid-run leaves its code
// running; the result is fetched by id, 202 while it runs.
func TestFetchAfterClientLeft(t *testing.T) {
	e := newEnv(t, nil, nil)
	const name = "leaver"
	p := sess + name
	key := tenant.Local.SessionKey(name)
	s := e.openStream(t, req{method: "POST", path: p + "/executions",
		body: execBody(gateCode("started", "finished")+"x = 42\n", "slow-1")})
	readUntil(t, s, "started\n")
	s.Close() // the client goes away mid-run

	resp, b := e.do(t, req{method: "GET", path: p + "/executions/slow-1"})
	var pend struct{ ID, Session, Status string }
	expect(t, resp, b, http.StatusAccepted, &pend)
	if pend.Status != "running" || pend.ID != "slow-1" || pend.Session != name {
		t.Fatalf("while running: %s", b)
	}
	openGate(t, e, key)
	resp, b = e.do(t, req{method: "GET", path: p + "/executions/slow-1?wait=true"})
	var x execution
	expect(t, resp, b, 200, &x)
	if x.Stdout != "started\nfinished\n" || x.Interrupted || x.TimedOut {
		t.Fatalf("result after the client left: %s", b)
	}
	resp, b = e.do(t, req{method: "POST", path: p + "/executions", body: execBody("print(x)", "")})
	expect(t, resp, b, 200, &x)
	if x.Stdout != "42\n" {
		t.Fatalf("x = %q: the code did not run to its end", x.Stdout)
	}
	resp, b = e.do(t, req{method: "GET", path: p + "/executions/slow-1?wait=maybe"})
	expectError(t, resp, b, 400, "invalid_wait")
}

// TestEventStream: framing, ids, resume with Last-Event-ID (live and from
// the recorded result), 204 after the final event.
func TestEventStream(t *testing.T) {
	e := newEnv(t, nil, nil)
	const name = "streamer"
	p := sess + name

	t.Run("framing", func(t *testing.T) {
		code := "import sys\nprint('a', flush=True)\nprint('e', file=sys.stderr, flush=True)\nprint('b', flush=True)\n1+1"
		s := e.openStream(t, req{method: "POST", path: p + "/executions", body: execBody(code, "frame-1")})
		defer s.Close()
		if ct := s.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("Content-Type %q", ct)
		}
		evs := s.all(t)
		if text(t, evs, "stdout") != "a\nb\n" || text(t, evs, "stderr") != "e\n" {
			t.Fatalf("events %+v", evs)
		}
		ids := map[string]bool{}
		displays := 0
		for _, ev := range evs[:len(evs)-1] {
			if ids[ev.id] {
				t.Fatalf("event id %q twice in %+v", ev.id, evs)
			}
			ids[ev.id] = true
			if ev.name == "display" {
				displays++
			}
		}
		if displays != 1 || evs[len(evs)-2].id != "4.2.1" {
			t.Fatalf("want one display and the cursor 4.2.1 before the result: %+v", evs)
		}
		if x := final(t, evs); x.Stdout != "a\nb\n" || x.Results[0]["text/plain"] != "2" {
			t.Fatalf("result %+v", x)
		}
	})

	t.Run("resume", func(t *testing.T) {
		key := tenant.Local.SessionKey(name)
		body := execBody(gateCode("one", "two"), "resume-1")
		s := e.openStream(t, req{method: "POST", path: p + "/executions", body: body})
		if last := readUntil(t, s, "one\n"); last != "4.0.0" {
			t.Fatalf("the id after %q is %q, want the cursor 4.0.0", "one\n", last)
		}
		s.Close()
		// Resume while it runs: only what came after 4.0.0.
		live := e.openStream(t, req{method: "GET", path: p + "/executions/resume-1",
			header: map[string]string{"Last-Event-ID": "4.0.0"}})
		defer live.Close()
		openGate(t, e, key)
		evs := live.all(t)
		if got := text(t, evs, "stdout"); got != "two\n" {
			t.Fatalf("resumed live stream gave stdout %q: %+v", got, evs)
		}
		if x := final(t, evs); x.Stdout != "one\ntwo\n" {
			t.Fatalf("result %+v", x)
		}
		// Resume once it ended: from the recorded result, by GET and by
		// POSTing the same body again.
		for _, r := range []req{
			{method: "GET", path: p + "/executions/resume-1", header: map[string]string{"Last-Event-ID": "4.0.0"}},
			{method: "POST", path: p + "/executions", body: body, header: map[string]string{"Last-Event-ID": "4.0.0"}},
		} {
			s := e.openStream(t, r)
			evs := s.all(t)
			s.Close()
			if got := text(t, evs, "stdout"); got != "two\n" {
				t.Fatalf("%s resumed after the end: stdout %q: %+v", r.method, got, evs)
			}
			if x := final(t, evs); !x.Replayed {
				t.Fatalf("%s: result not flagged replayed: %+v", r.method, x)
			}
		}
		// From the start: everything.
		s = e.openStream(t, req{method: "GET", path: p + "/executions/resume-1"})
		evs = s.all(t)
		s.Close()
		if got := text(t, evs, "stdout"); got != "one\ntwo\n" {
			t.Fatalf("replay from the start: %q", got)
		}
		// After the final event: nothing more, 204.
		for _, r := range []req{
			{method: "GET", path: p + "/executions/resume-1"},
			{method: "POST", path: p + "/executions", body: body},
		} {
			r.header = map[string]string{"Accept": "text/event-stream", "Last-Event-ID": "done"}
			resp, b := e.do(t, r)
			if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
				t.Fatalf("%s after done: %d %s", r.method, resp.StatusCode, b)
			}
		}
		// n was counted once in all of this.
		resp, b := e.do(t, req{method: "GET", path: p})
		var info struct {
			ExecutionCount int `json:"execution_count"`
		}
		expect(t, resp, b, 200, &info)
		if info.ExecutionCount != 2 {
			t.Fatalf("execution count %d, want 2 (frame-1, resume-1 once)", info.ExecutionCount)
		}
	})

	t.Run("bad Last-Event-ID", func(t *testing.T) {
		for _, id := range []string{"x", "1.2", "1.-2.3", "01.0.0", "1.2.3.4"} {
			resp, b := e.do(t, req{method: "GET", path: p + "/executions/resume-1",
				header: map[string]string{"Accept": "text/event-stream", "Last-Event-ID": id}})
			expectError(t, resp, b, 400, "invalid_last_event_id")
		}
	})

	t.Run("error before any event", func(t *testing.T) {
		s := e.openStream(t, req{method: "POST", path: p + "/executions", body: execBody("other code", "frame-1")})
		defer s.Close()
		if s.resp.StatusCode != http.StatusConflict {
			t.Fatalf("reusing an id for other code streamed: %d", s.resp.StatusCode)
		}
	})
}

// TestAuthAndTenants: keys are required and name tenants that never see
// each other's sessions.
func TestAuthAndTenants(t *testing.T) {
	e := newEnv(t, []string{"key-a", "key-b"}, nil)
	p := sess + "shared"

	for _, c := range []struct{ name, header string }{
		{"no key", ""},
		{"wrong key", "Bearer key-c"},
		{"not bearer", "Basic a2V5LWE6"},
		{"empty bearer", "Bearer "},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := req{method: "GET", path: p}
			if c.header != "" {
				r.header = map[string]string{"Authorization": c.header}
			}
			resp, b := e.do(t, r)
			expectError(t, resp, b, http.StatusUnauthorized, "unauthorized")
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}

	resp, b := e.do(t, req{method: "POST", path: p + "/executions", key: "key-a", body: execBody("secret = 'a'\nprint('ok')", "a-1")})
	var x execution
	expect(t, resp, b, 200, &x)

	t.Run("another tenant's session is unknown", func(t *testing.T) {
		for _, r := range []req{
			{method: "GET", path: p},
			{method: "GET", path: p + "/artifacts"},
			{method: "GET", path: p + "/datasets"},
			{method: "DELETE", path: p},
		} {
			r.key = "key-b"
			resp, b := e.do(t, r)
			expectError(t, resp, b, 404, "session_not_found")
		}
		resp, b := e.do(t, req{method: "GET", path: p + "/executions/a-1", key: "key-b"})
		expectError(t, resp, b, 404, "execution_not_found")
		// The same name is b's own session, fresh.
		resp, b = e.do(t, req{method: "POST", path: p + "/executions", key: "key-b", body: execBody("print(globals().get('secret'))", "a-1")})
		expect(t, resp, b, 200, &x)
		if x.Stdout != "None\n" || x.Replayed {
			t.Fatalf("tenant b's session %q saw: %s", "shared", b)
		}
		resp, b = e.do(t, req{method: "POST", path: p + "/executions", key: "key-a", body: execBody("print(secret)", "")})
		expect(t, resp, b, 200, &x)
		if x.Stdout != "a\n" {
			t.Fatalf("tenant a's session after b used the name: %s", b)
		}
	})

	t.Run("openapi needs no key", func(t *testing.T) {
		resp, b := e.do(t, req{method: "GET", path: "/v1/agentbox/openapi.yaml"})
		if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "openapi: 3") {
			t.Fatalf("openapi.yaml: %d %.40s", resp.StatusCode, b)
		}
	})
}

// readUntil reads stdout events until their text is want, and returns the
// last event's id.
func readUntil(t *testing.T, s *eventStream, want string) string {
	t.Helper()
	var evs []sseEvent
	for {
		ev, err := s.next(t)
		if err != nil {
			t.Fatalf("waiting for stdout %q: %v after %+v", want, err, evs)
		}
		evs = append(evs, ev)
		got := text(t, evs, "stdout")
		if got == want {
			return ev.id
		}
		if !strings.HasPrefix(want, got) {
			t.Fatalf("stdout %q, want %q", got, want)
		}
	}
}
