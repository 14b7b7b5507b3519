package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace/noop"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentbox/agentbox/session"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it takes
// POST /v1/traces (protobuf) and keeps the spans with their resources.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
	bad   []string // requests it refused, and why
}

type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, why string) {
		o.mu.Lock()
		o.bad = append(o.bad, r.Method+" "+r.URL.Path+": "+why)
		o.mu.Unlock()
		http.Error(w, why, code)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		fail(http.StatusNotFound, "not an OTLP trace export")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		fail(http.StatusUnsupportedMediaType, "content type "+ct)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			fail(http.StatusBadRequest, err.Error())
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		fail(http.StatusBadRequest, "protobuf: "+err.Error())
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		service := attrString(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o.spans = append(o.spans, receivedSpan{service, s})
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (o *otlpReceiver) received() ([]receivedSpan, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.spans), slices.Clone(o.bad)
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// restoreGlobals puts back a no-op tracer provider, propagator and error
// handler when the test ends: run installs the exporting ones as the
// process's globals, as main does, and they must not outlive this test.
func restoreGlobals(t *testing.T) {
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Print(err) }))
	})
}

// TestExecExportsOTLP runs `agentbox exec` with the standard OTEL_*
// variables pointing at an OTLP/HTTP receiver on loopback: by the time the
// command returns, the execution's span has reached it, named as the
// GenAI conventions say, with the session key and the execution id.
func TestExecExportsOTLP(t *testing.T) {
	sandboxEnv(t)
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	restoreGlobals(t)
	// Set after sandboxEnv: they are unset again before its cleanup stops
	// the sessions, which then exports nothing.
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")

	r := agentbox(t, "", "exec", "--session", "otlp", "--id", "call-42", "6 * 7")
	if r.code != exitOK || r.stdout != "42\n" {
		t.Fatalf("exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("stderr = %q, want nothing (the export succeeded)", r.stderr)
	}
	spans, bad := recv.received()
	if len(bad) > 0 {
		t.Errorf("the receiver refused: %v", bad)
	}
	var exec *receivedSpan
	var names []string
	for i, s := range spans {
		names = append(names, s.span.GetName())
		if s.span.GetName() == session.SpanExec {
			exec = &spans[i]
		}
	}
	if exec == nil {
		t.Fatalf("no span %q among %d received: %v", session.SpanExec, len(spans), names)
	}
	if exec.service != "agentbox" {
		t.Errorf("service.name = %q, want agentbox", exec.service)
	}
	for k, want := range map[string]string{
		"gen_ai.operation.name":  "execute_tool",
		"gen_ai.conversation.id": "otlp",
		"gen_ai.tool.call.id":    "call-42",
		"agentbox.session.id":    session.ID("otlp"),
		"agentbox.outcome":       "ok",
	} {
		if got := attrString(exec.span.GetAttributes(), k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if len(exec.span.GetTraceId()) != 16 || bytes.Equal(exec.span.GetTraceId(), make([]byte, 16)) {
		t.Errorf("trace id %x, want 16 non-zero bytes", exec.span.GetTraceId())
	}
}
