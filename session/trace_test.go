package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracedManager is a real Manager whose spans go to an in-memory recorder.
func tracedManager(t *testing.T, edit func(*config.Config), opts ...session.Option) (*session.Manager, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	m := newManager(t, edit, append([]session.Option{session.WithTracerProvider(tp)}, opts...)...)
	return m, rec, tp.Tracer("test")
}

// spansNamed returns the ended spans called name, in order.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// lastSpan returns the last ended span called name, failing without one.
func lastSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	s := spansNamed(rec, name)
	if len(s) == 0 {
		var names []string
		for _, e := range rec.Ended() {
			names = append(names, e.Name())
		}
		t.Fatalf("no span %q; spans: %v", name, names)
	}
	return s[len(s)-1]
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// want checks span s's attributes against w (values compared as text).
func want(t *testing.T, s sdktrace.ReadOnlySpan, w map[attribute.Key]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range w {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: no attribute %s (want %q)", s.Name(), k, v)
			continue
		}
		if g.Emit() != v {
			t.Errorf("%s: %s = %q, want %q", s.Name(), k, g.Emit(), v)
		}
	}
}

func childOf(t *testing.T, s sdktrace.ReadOnlySpan, parent trace.SpanContext) {
	t.Helper()
	if s.Parent().SpanID() != parent.SpanID() || s.SpanContext().TraceID() != parent.TraceID() {
		t.Errorf("%s: parent %s/%s, want %s/%s", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID(), parent.TraceID(), parent.SpanID())
	}
}

// TestTraceSpans runs the calls of a session under a caller's span and
// checks each call's span: its parent, attributes and status.
func TestTraceSpans(t *testing.T) {
	t.Parallel()
	m, rec, tracer := tracedManager(t, func(c *config.Config) { c.PoolSize = 1 })
	const key = "traced"
	waitFor(t, "a warm container", func() bool { return m.PoolReady() == 1 })

	ctx, caller := tracer.Start(context.Background(), "agent turn")
	cc := caller.SpanContext()
	res, err := m.Exec(ctx, key, "x = 41\nprint('hello')", session.ExecID("call-1"))
	if err != nil || res.Error != nil {
		t.Fatalf("exec: %v %v", err, res)
	}
	exec := lastSpan(t, rec, session.SpanExec)
	childOf(t, exec, cc)
	want(t, exec, map[attribute.Key]string{
		"gen_ai.conversation.id":    key,
		session.AttrSessionID:       session.ID(key),
		"gen_ai.tool.call.id":       "call-1",
		"gen_ai.operation.name":     "execute_tool",
		session.AttrOutcome:         "ok",
		session.AttrExecutionCount:  "1",
		session.AttrStdoutBytes:     "6",
		session.AttrStderrBytes:     "0",
		session.AttrArtifacts:       "0",
		session.AttrKernelRestarted: "false",
	})
	if exec.Status().Code != codes.Unset {
		t.Errorf("ok exec: status %v", exec.Status())
	}
	for k := range attrs(exec) {
		if k == session.AttrCode || k == session.AttrStdout || k == session.AttrStderr {
			t.Errorf("exec span records %s without WithTraceContent", k)
		}
	}
	// The first call opened the session: from the warm pool, under it.
	open := lastSpan(t, rec, session.SpanOpen)
	childOf(t, open, exec.SpanContext())
	create := lastSpan(t, rec, session.SpanCreate)
	childOf(t, create, open.SpanContext())
	want(t, create, map[attribute.Key]string{session.AttrPoolHit: "true"})
	childOf(t, lastSpan(t, rec, session.SpanPoolAcquire), create.SpanContext())
	childOf(t, lastSpan(t, rec, session.SpanIngest), exec.SpanContext())

	// Raised: the exception's name, a failed tool call.
	if _, err := m.Exec(ctx, key, "1/0"); err != nil {
		t.Fatal(err)
	}
	raised := lastSpan(t, rec, session.SpanExec)
	childOf(t, raised, cc)
	want(t, raised, map[attribute.Key]string{session.AttrOutcome: "raised", "exception.type": "ZeroDivisionError", "error.type": "ZeroDivisionError", session.AttrExecutionCount: "2"})
	if raised.Status().Code != codes.Error || !strings.Contains(raised.Status().Description, "ZeroDivisionError") {
		t.Errorf("raised: status %v", raised.Status())
	}
	if id := attrs(raised)["gen_ai.tool.call.id"].AsString(); id == "" {
		t.Error("raised: no generated tool call id")
	}

	// Timed out.
	if _, err := m.Exec(ctx, key, "import time\ntime.sleep(60)", session.Timeout(time.Second)); err != nil {
		t.Fatal(err)
	}
	want(t, lastSpan(t, rec, session.SpanExec), map[attribute.Key]string{session.AttrOutcome: "timed_out"})

	// A kernel crash: restarted, state lost.
	if _, err := m.Exec(ctx, key, "import os; os._exit(3)"); err != nil {
		t.Fatal(err)
	}
	want(t, lastSpan(t, rec, session.SpanExec), map[attribute.Key]string{session.AttrOutcome: "kernel_restarted", session.AttrKernelRestarted: "true", session.AttrStateLost: "true"})

	// A shell command.
	cr, err := m.Run(ctx, key, session.Command{Line: "echo out; echo error >&2; exit 3"})
	if err != nil || cr.ExitCode != 3 {
		t.Fatalf("run: %v %+v", err, cr)
	}
	run := lastSpan(t, rec, session.SpanRun)
	childOf(t, run, cc)
	want(t, run, map[attribute.Key]string{
		"gen_ai.conversation.id": key, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": cr.ID,
		session.AttrExitCode: "3", session.AttrStdoutBytes: "4", session.AttrStderrBytes: "6", session.AttrCutBytes: "0", session.AttrOutcome: "failed",
	})
	if _, ok := attrs(run)[session.AttrLine]; ok {
		t.Error("run span records the command line without WithTraceContent")
	}

	// A background command: its own span, ended with it.
	id, err := m.StartCommand(ctx, key, session.Command{Line: "echo bg"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.WaitCommand(ctx, key, id); err != nil {
		t.Fatal(err)
	}
	start := lastSpan(t, rec, session.SpanStartCommand)
	childOf(t, start, cc)
	bg := lastSpan(t, rec, session.SpanCommand)
	childOf(t, bg, start.SpanContext())
	want(t, bg, map[attribute.Key]string{"gen_ai.tool.call.id": id, session.AttrExitCode: "0", session.AttrStdoutBytes: "3", session.AttrOutcome: "ok"})

	// A file write.
	if _, err := m.WriteFile(ctx, key, "/session/a.txt", strings.NewReader("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := lastSpan(t, rec, session.SpanFilePrefix+"write")
	childOf(t, w, cc)
	want(t, w, map[attribute.Key]string{"gen_ai.conversation.id": key, session.AttrPath: "/session/a.txt", session.AttrBytes: "5", session.AttrFiles: "1"})

	// A failed file operation sets the span's status.
	if _, err := m.StatFile(ctx, key, "/session/missing"); err == nil {
		t.Fatal("stat of a missing file: no error")
	}
	if st := lastSpan(t, rec, session.SpanFilePrefix+"stat").Status(); st.Code != codes.Error {
		t.Errorf("failed stat: status %v", st)
	}

	// Pause and resume.
	if err := m.Pause(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := m.Resume(ctx, key); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{session.SpanPause, session.SpanResume} {
		s := lastSpan(t, rec, name)
		childOf(t, s, cc)
		want(t, s, map[attribute.Key]string{"gen_ai.conversation.id": key, session.AttrSessionID: session.ID(key)})
		if s.Status().Code == codes.Error {
			t.Errorf("%s: status %v", name, s.Status())
		}
	}
	caller.End()
}

// TestTraceContent records code and output only when asked.
func TestTraceContent(t *testing.T) {
	t.Parallel()
	m, rec, _ := tracedManager(t, nil, session.WithTraceContent(true))
	ctx := context.Background()
	if _, err := m.Exec(ctx, "content", "print('secret output')"); err != nil {
		t.Fatal(err)
	}
	want(t, lastSpan(t, rec, session.SpanExec), map[attribute.Key]string{
		session.AttrCode: "print('secret output')", session.AttrStdout: "secret output\n", session.AttrStderr: "",
	})
	if _, err := m.Run(ctx, "content", session.Command{Line: "echo hi"}); err != nil {
		t.Fatal(err)
	}
	want(t, lastSpan(t, rec, session.SpanRun), map[attribute.Key]string{session.AttrLine: "echo hi", session.AttrStdout: "hi\n"})
	// A fresh container of its own: no warm pool.
	want(t, lastSpan(t, rec, session.SpanCreate), map[attribute.Key]string{session.AttrPoolHit: "false"})
	create := lastSpan(t, rec, session.SpanCreate)
	childOf(t, lastSpan(t, rec, session.SpanContainer), create.SpanContext())
	childOf(t, lastSpan(t, rec, session.SpanKernelReady), create.SpanContext())
}

// waitFor polls cond until it holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
