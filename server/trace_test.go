package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/telemetry"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/session"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTraceparent sends a request carrying a W3C traceparent through the
// server's handler to a mount that runs code on a real Manager: the
// server's span is the child of the caller's, and the execution's span the
// child of the server's. /metrics serves the Manager's registry.
func TestTraceparent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	reg := prometheus.NewRegistry()
	cfg := testConfig(t)
	ns := namespace()
	cli := dockertest.Engine(t)
	m, err := session.NewManager(context.Background(), cfg, session.WithNamespace(ns),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}),
		session.WithTracerProvider(tp), session.WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := dockertest.Sweep(ctx, cli, session.LabelNamespace+"="+ns); err != nil {
			t.Errorf("sweep: %v", err)
		}
	})
	native := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := m.Exec(r.Context(), "traced-request", "1 + 1")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		io.WriteString(w, res.ID)
	})
	srv := httptest.NewServer(server.Handler(server.Mounts{
		Native: native, Metrics: telemetry.MetricsHandler(reg), Tracing: tp,
	}, server.Policy{Keyless: true, MaxBody: 1 << 20}))
	defer srv.Close()

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest("POST", srv.URL+"/v1/agentbox/sessions/x/exec", nil)
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("exec through the server: %s %s", resp.Status, body)
	}

	var serverSpan, execSpan sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "POST /v1/agentbox/":
			serverSpan = s
		case session.SpanExec:
			execSpan = s
		}
	}
	if serverSpan == nil || execSpan == nil {
		t.Fatalf("spans: server %v, exec %v", serverSpan, execSpan)
	}
	if got := serverSpan.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("server span in trace %s, want the caller's %s", got, traceID)
	}
	if got := serverSpan.Parent().SpanID().String(); got != parentID || !serverSpan.Parent().IsRemote() {
		t.Errorf("server span's parent %s (remote %v), want the caller's %s", got, serverSpan.Parent().IsRemote(), parentID)
	}
	if execSpan.Parent().SpanID() != serverSpan.SpanContext().SpanID() || execSpan.SpanContext().TraceID().String() != traceID {
		t.Errorf("exec span's parent %s, want the server span %s", execSpan.Parent().SpanID(), serverSpan.SpanContext().SpanID())
	}

	// No span for the probes; /metrics shows the execution.
	n := len(rec.Ended())
	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `agentbox_executions_total{outcome="ok"} 1`) {
		t.Errorf("/metrics lacks the execution:\n%s", metrics)
	}
	if resp, err := http.Get(srv.URL + "/healthz"); err == nil {
		resp.Body.Close()
	}
	if got := len(rec.Ended()); got != n {
		t.Errorf("/metrics and /healthz made %d spans, want none", got-n)
	}
}

// TestNoMetricsMount: without a Metrics handler /metrics is no route.
func TestNoMetricsMount(t *testing.T) {
	srv := httptest.NewServer(server.Handler(server.Mounts{}, server.Policy{Keyless: true, MaxBody: 1 << 20}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics with no Metrics mount: %s, want 404", resp.Status)
	}
}
