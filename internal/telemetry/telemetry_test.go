package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnabled(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	}
	for _, tt := range tests {
		if got := Enabled(env(tt.env)); got != tt.want {
			t.Errorf("Enabled(%v) = %v, want %v", tt.env, got, tt.want)
		}
	}
}

// TestSetupOff sets nothing up without the variables: no provider, no
// exporter, nothing printed.
func TestSetupOff(t *testing.T) {
	var logs bytes.Buffer
	tp, shutdown, err := Setup(context.Background(), "test", env(nil), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.(*sdktrace.TracerProvider); ok {
		t.Error("Setup with no variables installed an SDK provider")
	}
	_, span := tp.Tracer("t").Start(context.Background(), "x")
	if span.IsRecording() {
		t.Error("a span records with tracing off")
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	if logs.Len() != 0 {
		t.Errorf("logged with tracing off: %s", logs.String())
	}
}

// TestSetupBadExporter names the variable at fault.
func TestSetupBadExporter(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
	_, _, err := Setup(context.Background(), "test", env(map[string]string{"OTEL_TRACES_EXPORTER": "carrier-pigeon"}), nil)
	if err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Fatalf("Setup with an unknown exporter: %v", err)
	}
}

// TestSetupOTLP exports a span over OTLP/HTTP to a receiver on loopback.
func TestSetupOTLP(t *testing.T) {
	var mu sync.Mutex
	var got []byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			mu.Lock()
			got = append(got, b...)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()
	vars := map[string]string{
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL,
	}
	for k, v := range vars {
		t.Setenv(k, v) // autoexport reads the process's environment
	}
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	tp, shutdown, err := Setup(context.Background(), "agentbox-test", env(vars), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("t").Start(context.Background(), "exported-span-name")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, w := range []string{"exported-span-name", "agentbox-test"} {
		if !bytes.Contains(got, []byte(w)) {
			t.Errorf("the receiver got no %q (%d bytes)", w, len(got))
		}
	}
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewTextHandler(&buf, nil))).With("session_key", "k")
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "x")
	log.InfoContext(ctx, "with span")
	log.InfoContext(context.Background(), "without span")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	sc := span.SpanContext()
	for _, w := range []string{"session_key=k", "trace_id=" + sc.TraceID().String(), "span_id=" + sc.SpanID().String()} {
		if !strings.Contains(lines[0], w) {
			t.Errorf("%q lacks %q", lines[0], w)
		}
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("a line without a span has a trace id: %q", lines[1])
	}
	span.End()
}

func TestCountDownloads(t *testing.T) {
	reg := NewRegistry()
	h, err := CountDownloads(reg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("token") == "" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("blob"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"/artifacts/a?token=x", "/artifacts/a?token=x", "/artifacts/a"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", u, nil))
	}
	rec := httptest.NewRecorder()
	MetricsHandler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, w := range []string{`agentbox_artifact_downloads_total{code="200",method="get"} 2`, `agentbox_artifact_downloads_total{code="401",method="get"} 1`, "go_goroutines"} {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
	// A second counter of the same name on the registry is refused.
	if _, err := CountDownloads(reg, h); err == nil {
		t.Error("a second CountDownloads on one registry: no error")
	}
}
