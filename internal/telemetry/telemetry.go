// Package telemetry sets up what agentbox's programs export: traces by the
// standard OpenTelemetry environment variables (OTEL_TRACES_EXPORTER,
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL and friends,
// through the contrib autoexport package), a Prometheus registry and its
// /metrics handler, and a slog.Handler that adds the active span's ids to
// log lines. The library packages (session, ...) never call it: they use
// whatever provider and registry the program hands them. Only programs
// (cmd/*, examples) read the environment here.
//
// Tracing is off by default: with none of OTEL_TRACES_EXPORTER,
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set
// (or OTEL_TRACES_EXPORTER=none, or OTEL_SDK_DISABLED=true) nothing is set
// up, nothing is exported and nothing is printed.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Enabled reports whether the environment (getenv) asks for traces to be
// exported.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); {
	case exp == "none":
		return false
	case exp != "":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs, when the environment asks for it (see Enabled), a tracer
// provider exporting by OTEL_* variables as the global one, with the W3C
// trace context and baggage as the global propagator, and errors of the
// export logged on log. service names the program (OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES win). shutdown flushes what is buffered and
// stops; call it on exit. With tracing off, the returned provider is the
// no-op one and shutdown does nothing.
func Setup(ctx context.Context, service string, getenv func(string) string, log *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	if !Enabled(getenv) {
		return otel.GetTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("trace exporter (OTEL_TRACES_EXPORTER): %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err == nil {
		// The environment's service name and attributes win over ours.
		res, err = resource.Merge(res, envResource(ctx))
	}
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry", "err", err) }))
	}
	return tp, tp.Shutdown, nil
}

func envResource(ctx context.Context) *resource.Resource {
	r, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil {
		return resource.Empty()
	}
	return r
}

// Propagator is what trace context travels in over HTTP: W3C traceparent
// and tracestate, and baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// NewRegistry returns a Prometheus registry of a program's own (never the
// global one), with the Go runtime's and the process's collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// MetricsHandler serves reg in the Prometheus text format (GET /metrics).
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// CountDownloads wraps an artifact download handler so that reg counts its
// requests by status code (agentbox_artifact_downloads_total{code}).
func CountDownloads(reg prometheus.Registerer, h http.Handler) (http.Handler, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbox_artifact_downloads_total",
		Help: "Artifact download requests by HTTP status code.",
	}, []string{"code", "method"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("register download metrics: %w", err)
	}
	return promhttp.InstrumentHandlerCounter(c, h), nil
}

// LogHandler adds trace_id and span_id to the records of h logged with a
// context holding a valid span.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(as)}
}

func (l logHandler) WithGroup(name string) slog.Handler {
	return logHandler{l.Handler.WithGroup(name)}
}

// shutdownTimeout bounds flushing the spans still buffered on exit.
const shutdownTimeout = 5 * time.Second

// Start is Setup for a program's main: tracing by the process's
// environment, a configuration error reported on stderr (the program runs
// on without tracing). Call the returned func on exit.
func Start(ctx context.Context, service string, stderr io.Writer) func() {
	_, shutdown, err := Setup(ctx, service, os.Getenv, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		fmt.Fprintf(stderr, "%s: tracing off: %v\n", service, err)
		return func() {}
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			fmt.Fprintf(stderr, "%s: export spans: %v\n", service, err)
		}
	}
}
