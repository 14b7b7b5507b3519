package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// dropProcessor is a span processor that keeps nothing: spans are
// recorded (attributes computed) and dropped when they end.
type dropProcessor struct{}

func (dropProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropProcessor) Shutdown(context.Context) error                  { return nil }
func (dropProcessor) ForceFlush(context.Context) error                { return nil }

// discardExporter is an exporter that sends nowhere.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracingOverhead measures `pass` through the Manager with no
// tracer provider (none given, no global one: the library's default), with
// an SDK provider whose processor drops every span, and with the SDK's
// batch processor over an exporter that discards, against the same
// kernel's own client: three Managers on one namespace share one session,
// and the four calls are interleaved, in an order that rotates each round.
func BenchmarkTracingOverhead(b *testing.B) {
	ctx := context.Background()
	cfg := testConfig(b, nil)
	ns := namespace()
	tps := map[string]*sdktrace.TracerProvider{
		"drop":  sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(dropProcessor{})),
		"batch": sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(discardExporter{}))),
	}
	for _, tp := range tps {
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	}
	managers := map[string]*session.Manager{
		"none":  managerFor(b, cfg, ns),
		"drop":  managerFor(b, cfg, ns, session.WithTracerProvider(tps["drop"])),
		"batch": managerFor(b, cfg, ns, session.WithTracerProvider(tps["batch"])),
	}
	const key = "overhead"
	info, err := managers["none"].Start(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	c := dockertest.Dial(b, info.ContainerID)
	order := []string{"kernel", "none", "drop", "batch"}
	samples := map[string]dockertest.Samples{}
	warmup, rounds := dockertest.Rounds(20, 1), dockertest.Rounds(400, 2)
	for i := range warmup + rounds {
		for j := range order {
			which := order[(i+j)%len(order)]
			start := time.Now()
			if which == "kernel" {
				if _, err := c.Execute(ctx, kernel.ExecRequest{Code: "pass"}, nil); err != nil {
					b.Fatal(err)
				}
			} else {
				res, err := managers[which].Exec(ctx, key, "pass")
				if err != nil || res.Error != nil || res.StateLost {
					b.Fatalf("%s: %v %+v", which, err, res)
				}
			}
			if d := time.Since(start); i >= warmup {
				samples[which] = append(samples[which], d)
			}
		}
	}
	kernelS := samples["kernel"]
	report(b, "kernel", kernelS, nil)
	for _, which := range order[1:] {
		report(b, which, samples[which], kernelS)
	}
	med := func(which string) float64 { return float64(samples[which].Pct(0.5)) }
	for _, which := range []string{"drop", "batch"} {
		b.ReportMetric(med(which)/med("none"), fmt.Sprintf("%s/none", which))
	}
}
