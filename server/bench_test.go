package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// served is a server on loopback over a Manager, with one tenant.
type served struct {
	m      *session.Manager
	base   string
	tenant tenant.Tenant
	key    string
}

func serveForBench(b *testing.B) *served {
	cfg := testConfig(b)
	return serveOver(b, cfg, manager(b, cfg, namespace()))
}

// serveOver serves m on loopback with one tenant until b ends.
func serveOver(b *testing.B, cfg config.Config, m *session.Manager) *served {
	const key = "bench-key-0123456789abcdef"
	keys := tenant.NewKeys([]string{key})
	tn, _ := keys.Lookup(key)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, cfg, m, server.APIs(m, cfg, keys, tenant.NewTokens(bytes.Repeat([]byte("b"), 32)), nil, nil), server.Options{Keys: keys, Listener: ln})
	}()
	b.Cleanup(func() { cancel(); <-done })
	return &served{m: m, base: "http://" + ln.Addr().String(), tenant: tn, key: key}
}

// sandbox creates one through the lifecycle API and returns its id and
// execd address and headers.
func (s *served) sandbox(b *testing.B) (id, execd string, headers map[string]string) {
	post := func(url, body string, hdr map[string]string) []byte {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			b.Fatalf("POST %s: %d %s", url, resp.StatusCode, data)
		}
		return data
	}
	api := map[string]string{"OPEN-SANDBOX-API-KEY": s.key}
	var sb struct{ ID string }
	json.Unmarshal(post(s.base+"/v1/sandboxes", `{"image": {"uri": "python:3.11"}, "timeout": null}`, api), &sb)
	req, _ := http.NewRequest("GET", s.base+"/v1/sandboxes/"+sb.ID+"/endpoints/44772", nil)
	req.Header.Set("OPEN-SANDBOX-API-KEY", s.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var ep struct {
		Endpoint string
		Headers  map[string]string
	}
	if err := json.NewDecoder(resp.Body).Decode(&ep); err != nil {
		b.Fatal(err)
	}
	return sb.ID, "http://" + ep.Endpoint, ep.Headers
}

// call POSTs body to url with headers and reads the whole (streamed)
// answer, failing on an error event.
func call(b testing.TB, client *http.Client, url, body string, headers map[string]string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || bytes.Contains(data, []byte(`"type":"error"`)) {
		b.Fatalf("POST %s: %d %s", url, resp.StatusCode, data)
	}
}

// BenchmarkServeRoundTrip: a `pass` execution and a `true` command through
// agentbox serve on loopback (execd's /code and /command, as the
// OpenSandbox SDK sends them) against the same calls on the library, on the
// same session, interleaved, 40 rounds each.
func BenchmarkServeRoundTrip(b *testing.B) {
	dockertest.Engine(b)
	s := serveForBench(b)
	id, execd, hdr := s.sandbox(b)
	key := s.tenant.SessionKey(id)
	ctx := context.Background()
	client := &http.Client{}
	code := `{"code": "pass", "context": {"language": "python"}}`
	cmd := `{"command": "true"}`
	// Warm both paths (the kernel, the connections).
	for i := 0; i < 3; i++ {
		call(b, client, execd+"/code", code, hdr)
		call(b, client, execd+"/command", cmd, hdr)
	}
	var libExec, httpExec, libCmd, httpCmd dockertest.Samples
	timed := func(s *dockertest.Samples, do func()) {
		t := time.Now()
		do()
		*s = append(*s, time.Since(t))
	}
	for i := range dockertest.Rounds(40, 2) {
		lib := func() {
			if _, err := s.m.Exec(ctx, key, "pass"); err != nil {
				b.Fatal(err)
			}
		}
		served := func() { call(b, client, execd+"/code", code, hdr) }
		libRun := func() {
			if _, err := s.m.Run(ctx, key, session.Command{Line: "true"}); err != nil {
				b.Fatal(err)
			}
		}
		servedRun := func() { call(b, client, execd+"/command", cmd, hdr) }
		// Each side goes first every other round: the call after a
		// command meets the container forking the next spare supervisor.
		if i%2 == 0 {
			timed(&libExec, lib)
			timed(&httpExec, served)
			timed(&libCmd, libRun)
			timed(&httpCmd, servedRun)
		} else {
			timed(&httpExec, served)
			timed(&libExec, lib)
			timed(&httpCmd, servedRun)
			timed(&libCmd, libRun)
		}
	}
	dockertest.Report(b, "execLibrary", "ms", libExec, nil)
	dockertest.Report(b, "execServed", "ms", httpExec, libExec)
	dockertest.Report(b, "commandLibrary", "ms", libCmd, nil)
	dockertest.Report(b, "commandServed", "ms", httpCmd, libCmd)
	// The figures above are the benchmark: it reports its own metrics
	// (b.N is not used to scale work that starts containers).
}

// BenchmarkServeConcurrentSessions: requests per second of `pass` through
// execd's /code over 10 sandboxes at once, each its own client loop,
// against the same 10 sessions called through the library at once.
func BenchmarkServeConcurrentSessions(b *testing.B) {
	dockertest.Engine(b)
	s := serveForBench(b)
	n, per := dockertest.Rounds(10, 3), dockertest.Rounds(30, 2) // under -short (does it run?), 3 sandboxes
	type box struct {
		key, execd string
		hdr        map[string]string
	}
	boxes := make([]box, n)
	for i := range boxes {
		id, execd, hdr := s.sandbox(b)
		boxes[i] = box{s.tenant.SessionKey(id), execd, hdr}
	}
	ctx := context.Background()
	code := `{"code": "pass", "context": {"language": "python"}}`
	run := func(one func(box)) float64 {
		var wg sync.WaitGroup
		start := time.Now()
		for _, x := range boxes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < per; j++ {
					one(x)
				}
			}()
		}
		wg.Wait()
		return float64(n*per) / time.Since(start).Seconds()
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	served := func(x box) { call(b, client, x.execd+"/code", code, x.hdr) }
	library := func(x box) {
		if _, err := s.m.Exec(ctx, x.key, "pass"); err != nil {
			b.Fatal(err)
		}
	}
	run(served) // warm every kernel and connection
	// Paired runs, each side first in turn, and the median of the pairs'
	// ratios: one run takes a quarter of a second, and the machine's
	// neighbours make single runs differ by a quarter.
	var lib, srv, ratios []float64
	for i := range dockertest.Rounds(6, 2) {
		var l, s float64
		if i%2 == 0 {
			l, s = run(library), run(served)
		} else {
			s, l = run(served), run(library)
		}
		lib, srv, ratios = append(lib, l), append(srv, s), append(ratios, s/l)
	}
	b.ReportMetric(median(lib), "library-req/s")
	b.ReportMetric(median(srv), "served-req/s")
	b.ReportMetric(median(ratios), "served/library")
	b.Logf("%d sessions, %d calls each, %d pairs: library %.0f req/s, served %.0f req/s, ratios %.2f", n, per, len(lib), lib, srv, ratios)
}

// median of xs (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	if n := len(xs); n%2 == 1 {
		return xs[n/2]
	} else {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
}
