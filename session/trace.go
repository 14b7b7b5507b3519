package session

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0" // the last version with the gen_ai.* keys
	"go.opentelemetry.io/otel/trace"
)

// Tracing. Every public call of the Manager that does work in a session
// opens one span (named agentbox.<op>), a child of the caller's span in
// ctx, with the session key (gen_ai.conversation.id) and id; executions
// and commands follow the GenAI tool-call conventions (gen_ai.operation.name
// execute_tool, gen_ai.tool.call.id = the execution id). The slow parts
// (opening a session, a container's creation, its kernel's readiness, a
// warm container's handover, artifact ingestion, dataset staging) are
// child spans. Spans go to the provider of WithTracerProvider, else to the
// global one (otel.GetTracerProvider) as it is when the call runs: with
// none set, the no-op provider costs a context lookup per call and no
// attribute is computed. Code, output and command lines are recorded only
// with WithTraceContent(true).

// TracerName is the instrumentation scope of the Manager's spans.
const TracerName = "github.com/agentbox/agentbox/session"

// Span names.
const (
	SpanExec         = "execute_tool agentbox.exec" // GenAI: "execute_tool {gen_ai.tool.name}"
	SpanRun          = "execute_tool agentbox.run"
	SpanCommand      = "execute_tool agentbox.command" // a StartCommand's run, to its end
	SpanFetch        = "agentbox.fetch"
	SpanStartCommand = "agentbox.start_command"
	SpanStart        = "agentbox.start"
	SpanStop         = "agentbox.stop"
	SpanPause        = "agentbox.pause"
	SpanResume       = "agentbox.resume"
	SpanRenew        = "agentbox.renew"
	SpanOpen         = "agentbox.session.open"     // finding or creating the key's container, once per process
	SpanReattach     = "agentbox.session.reattach" // connecting to a running container
	SpanCreate       = "agentbox.session.create"   // a new session: pool acquire or container create
	SpanPoolAcquire  = "agentbox.pool.acquire"
	SpanContainer    = "agentbox.container.create"
	SpanKernelReady  = "agentbox.kernel.ready"
	SpanIngest       = "agentbox.artifacts.ingest"
	SpanDataset      = "agentbox.dataset.select"
	SpanStage        = "agentbox.dataset.stage"
	SpanFilePrefix   = "agentbox.file." // + write, read, stat, mkdir, remove, move, list, glob
)

// Attribute keys of agentbox's own.
const (
	AttrSessionID      = attribute.Key("agentbox.session.id")
	AttrContainerID    = attribute.Key("agentbox.container.id")
	AttrExecutionCount = attribute.Key("agentbox.execution.count")
	// AttrOutcome is ok, raised, timed_out, interrupted, state_lost,
	// kernel_restarted or error (a Go error) for executions; ok, failed
	// (exit code not 0), timed_out, interrupted or error for commands.
	AttrOutcome         = attribute.Key("agentbox.outcome")
	AttrReplayed        = attribute.Key("agentbox.replayed")
	AttrStateLost       = attribute.Key("agentbox.state_lost")
	AttrKernelRestarted = attribute.Key("agentbox.kernel_restarted")
	AttrRestartReason   = attribute.Key("agentbox.restart_reason")
	AttrExitCode        = attribute.Key("agentbox.command.exit_code")
	AttrSignal          = attribute.Key("agentbox.command.signal")
	AttrStdoutBytes     = attribute.Key("agentbox.stdout.bytes")
	AttrStderrBytes     = attribute.Key("agentbox.stderr.bytes")
	AttrCutBytes        = attribute.Key("agentbox.output.cut_bytes")
	AttrArtifacts       = attribute.Key("agentbox.artifacts.count")
	AttrArtifactBytes   = attribute.Key("agentbox.artifacts.bytes")
	AttrSkipped         = attribute.Key("agentbox.artifacts.skipped")
	AttrDurationMS      = attribute.Key("agentbox.duration_ms") // as the kernel or supervisor measured it
	AttrPath            = attribute.Key("agentbox.file.path")
	AttrFiles           = attribute.Key("agentbox.file.count")
	AttrBytes           = attribute.Key("agentbox.file.bytes")
	AttrPoolHit         = attribute.Key("agentbox.pool.hit")
	AttrDatasetID       = attribute.Key("agentbox.dataset.id")
	AttrDatasetStatus   = attribute.Key("agentbox.dataset.status")
	// Content, only with WithTraceContent(true).
	AttrCode   = attribute.Key("agentbox.code")
	AttrLine   = attribute.Key("agentbox.command.line")
	AttrStdout = attribute.Key("agentbox.stdout")
	AttrStderr = attribute.Key("agentbox.stderr")
)

// WithTracerProvider sends the Manager's spans to tp instead of the global
// provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(m *Manager) error { m.tp = tp; return nil }
}

// WithTraceContent records code, command lines and output in spans
// (agentbox.code, agentbox.command.line, agentbox.stdout, agentbox.stderr).
// Off by default: they may hold secrets and personal data.
func WithTraceContent(on bool) Option {
	return func(m *Manager) error { m.traceContent = on; return nil }
}

// startSpan opens a span of the Manager for the session of key ("": none).
func (m *Manager) startSpan(ctx context.Context, name, key string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	tp := m.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	ctx, span := tp.Tracer(TracerName).Start(ctx, name)
	if span.IsRecording() {
		if key != "" {
			span.SetAttributes(semconv.GenAIConversationID(key), AttrSessionID.String(ID(key)))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// endSpan ends span with err's status.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceIDOf is the W3C trace id of the span active in ctx, for the
// history: "" unless that span is valid and sampled, since only a sampled
// trace reaches a backend a person could jump to. The Manager's own span
// (a child of the caller's) carries the caller's trace id.
func traceIDOf(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// toolAttrs are the GenAI attributes of a tool call with id ("": none yet).
func toolAttrs(id string) []attribute.KeyValue {
	a := []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool}
	if id != "" {
		a = append(a, semconv.GenAIToolCallID(id))
	}
	return a
}

// execOutcome names how an execution ended, for spans and metrics.
func execOutcome(res *Result, err error) string {
	switch {
	case err != nil || res == nil:
		return "error"
	case res.TimedOut:
		return "timed_out"
	case res.KernelRestarted: // which loses the state too
		return "kernel_restarted"
	case res.StateLost: // a fresh session replaced a lost one
		return "state_lost"
	case res.Interrupted:
		return "interrupted"
	case res.Error != nil:
		return "raised"
	}
	return "ok"
}

// endExec ends an execution's (or fetch's) span with what it produced.
func (m *Manager) endExec(span trace.Span, code string, res *Result, err error) {
	outcome := execOutcome(res, err)
	if span.IsRecording() {
		span.SetAttributes(AttrOutcome.String(outcome))
		if m.traceContent && code != "" {
			span.SetAttributes(AttrCode.String(code))
		}
		if res != nil {
			var artBytes int64
			for _, a := range res.Artifacts {
				artBytes += a.Size
			}
			span.SetAttributes(
				semconv.GenAIToolCallID(res.ID),
				AttrExecutionCount.Int(res.ExecutionCount),
				AttrReplayed.Bool(res.Replayed),
				AttrStateLost.Bool(res.StateLost),
				AttrKernelRestarted.Bool(res.KernelRestarted),
				AttrStdoutBytes.Int(len(res.Stdout)),
				AttrStderrBytes.Int(len(res.Stderr)),
				AttrCutBytes.Int64(cutBytes(res.Truncated)),
				AttrArtifacts.Int(len(res.Artifacts)),
				AttrArtifactBytes.Int64(artBytes),
				AttrDurationMS.Float64(ms(res.Duration)),
			)
			if res.RestartReason != "" {
				span.SetAttributes(AttrRestartReason.String(res.RestartReason))
			}
			if res.Error != nil {
				span.SetAttributes(semconv.ExceptionType(res.Error.Name), semconv.ErrorTypeKey.String(res.Error.Name))
			}
			if m.traceContent {
				span.SetAttributes(AttrStdout.String(res.Stdout), AttrStderr.String(res.Stderr))
			}
			if outcome != "ok" {
				// A failed tool call, in the GenAI conventions' terms,
				// though not a failure of agentbox.
				desc := outcome
				if res.Error != nil {
					desc += ": " + res.Error.Name
				}
				span.SetStatus(codes.Error, desc)
			}
		}
	}
	endSpan(span, err)
}

// commandOutcome names how a command ended.
func commandOutcome(res *CommandResult, err error) string {
	switch {
	case err != nil || res == nil:
		return "error"
	case res.TimedOut:
		return "timed_out"
	case res.Interrupted:
		return "interrupted"
	case res.ExitCode != 0:
		return "failed"
	}
	return "ok"
}

// endCommand ends a shell command's span with how it ended.
func (m *Manager) endCommand(span trace.Span, line string, res *CommandResult, err error) {
	outcome := commandOutcome(res, err)
	if span.IsRecording() {
		span.SetAttributes(AttrOutcome.String(outcome))
		if m.traceContent {
			span.SetAttributes(AttrLine.String(line))
		}
		if res != nil {
			span.SetAttributes(
				semconv.GenAIToolCallID(res.ID),
				AttrExitCode.Int(res.ExitCode),
				AttrStdoutBytes.Int(len(res.Stdout)),
				AttrStderrBytes.Int(len(res.Stderr)),
				AttrCutBytes.Int64(cutBytes(res.Truncated)),
				AttrDurationMS.Float64(ms(res.Duration)),
			)
			if res.Signal != "" {
				span.SetAttributes(AttrSignal.String(res.Signal))
			}
			if m.traceContent {
				span.SetAttributes(AttrStdout.String(res.Stdout), AttrStderr.String(res.Stderr))
			}
			if outcome != "ok" {
				span.SetStatus(codes.Error, outcome)
			}
		}
	}
	endSpan(span, err)
}

func cutBytes(t map[string]int64) int64 {
	var n int64
	for _, v := range t {
		n += v
	}
	return n
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// fileSpan opens the span of file operation op on path.
func (m *Manager) fileSpan(ctx context.Context, op, key, path string) (context.Context, trace.Span) {
	return m.startSpan(ctx, SpanFilePrefix+strings.ReplaceAll(op, " ", "_"), key, AttrPath.String(path))
}

// endIngest ends the span of an execution's artifact ingestion.
func (m *Manager) endIngest(span trace.Span, res *Result) {
	if span.IsRecording() {
		var n int64
		for _, a := range res.Artifacts {
			n += a.Size
		}
		span.SetAttributes(AttrArtifacts.Int(len(res.Artifacts)), AttrArtifactBytes.Int64(n), AttrSkipped.Int(len(res.SkippedArtifacts)))
	}
	span.End()
}
