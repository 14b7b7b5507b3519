package native_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/server/tenant"
)

// TestExecIDReusedWhileRunning: an execution id reused for other code while
// the first run with that id still runs is refused (409 id_conflict), not
// joined to the first run's result.
func TestExecIDReusedWhileRunning(t *testing.T) {
	e := newEnv(t, nil, nil)
	const name = "dup"
	p := sess + name
	s := e.openStream(t, req{method: "POST", path: p + "/executions",
		body: execBody(gateCode("started", "finished"), "dup-1")})
	defer s.Close()
	readUntil(t, s, "started\n")

	// Bounded: a request joined to the gated run would wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, "POST", e.url+p+"/executions", strings.NewReader(execBody("print('other code')", "dup-1")))
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Errorf("the native API refuses an execution id reused for other code while the first runs: no answer in 30 s (joined to the first run?): %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), "id_conflict") {
			t.Errorf("the native API refuses an execution id reused for other code while the first runs: %d %s, want 409 id_conflict", resp.StatusCode, b)
		}
	}
	openGate(t, e, tenant.Local.SessionKey(name))
	readUntil(t, s, "finished\n")
	resp, b := e.do(t, req{method: "GET", path: p + "/executions/dup-1?wait=true"})
	var x execution
	expect(t, resp, b, 200, &x)
	if x.Stdout != "started\nfinished\n" {
		t.Fatalf("the first run's result: %s", b)
	}
}
