package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/kernel"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// ExecOption tunes one execution: ExecID, Timeout or OnEvent. The zero
// ExecOption changes nothing.
type ExecOption struct{ apply func(*execOptions) }

type execOptions struct {
	id      string
	timeout time.Duration
	onEvent func(kernel.Event)
	start   []StartOption   // for the session, if this call creates it
	queue   context.Context // ends the wait for the session's turn (QueueContext); nil: ctx
	admit   *Admission      // taken by the caller (Admitted); nil: Exec takes one
}

// ExecID names the execution (an agent passes its tool-call id). Running an
// id that already ran returns the recorded result, flagged Replayed, instead
// of running the code again; the same id with other code is an error
// (kernel.ErrIDConflict).
func ExecID(id string) ExecOption { return ExecOption{func(o *execOptions) { o.id = id }} }

// Timeout bounds the execution (default EXEC_TIMEOUT_S). The kernel enforces
// it, so it holds even if this process dies; on expiry the code gets
// KeyboardInterrupt and the result is flagged TimedOut.
func Timeout(d time.Duration) ExecOption {
	return ExecOption{func(o *execOptions) { o.timeout = d }}
}

// OnEvent sees output and rich results as they stream, in order. It runs on
// the connection's reader goroutine and must not block for long.
func OnEvent(fn func(kernel.Event)) ExecOption {
	return ExecOption{func(o *execOptions) { o.onEvent = fn }}
}

// QueueContext bounds the wait for the session's turn (behind the
// executions before it) by ctx, for a caller that runs the code on a
// context of its own (one its client cannot cancel, so that the result is
// recorded for later) but whose client may leave before the code starts:
// when ctx ends first, the execution is dropped, never run, and Exec
// returns ctx's error. Once the code reaches the kernel, only Exec's own
// context stops it.
func QueueContext(ctx context.Context) ExecOption {
	return ExecOption{func(o *execOptions) { o.queue = ctx }}
}

// Exec runs code in the session of key, creating the session if needed.
// When ctx ends, the code is interrupted and the result, flagged TimedOut or
// Interrupted, still returns. A Go error means the system failed: it is an
// *Error wrapping, for example, ErrSessionLost, ErrUnavailable or ErrClosed.
func (m *Manager) Exec(ctx context.Context, key, code string, opts ...ExecOption) (res *Result, err error) {
	ctx, span := m.startSpan(ctx, SpanExec, key, toolAttrs("")...)
	defer func() { m.endExec(span, code, res, err); m.metrics.execDone(res, err) }()
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.calls.Done()
	o := execOptions{timeout: m.cfg.ExecTimeout}
	for _, opt := range opts {
		if opt.apply != nil {
			opt.apply(&o)
		}
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	cr, err := m.resolve(key, o.start)
	if err != nil {
		return nil, &Error{Op: "exec", Key: key, Err: err}
	}
	admitted, err := m.admitted(ctx, key, o.admit)
	if err != nil {
		return nil, &Error{Op: "exec", Key: key, Err: err}
	}
	defer admitted()
	waitCtx := ctx
	if o.queue != nil {
		var stop context.CancelCauseFunc
		waitCtx, stop = context.WithCancelCause(ctx)
		unhook := context.AfterFunc(o.queue, func() { stop(context.Cause(o.queue)) })
		defer unhook()
		defer stop(nil)
	}
	named := o.id != ""
	if !named {
		o.id = kernel.NewID()
	}
	span.SetAttributes(toolAttrs(o.id)[1:]...)
	sum := codeSum(code)
	for attempt := 0; ; attempt++ {
		if named {
			if res, err := m.known(ctx, "exec", key, o.id, code, sum); res != nil || err != nil {
				return res, err
			}
		}
		e, release, err := m.acquireWith(waitCtx, key, true, cr)
		if err != nil && o.queue != nil && o.queue.Err() != nil {
			return nil, &Error{Op: "exec", Key: key, Err: fmt.Errorf("execution %s dropped, never run: its caller left while it waited for the session's turn: %w", o.id, context.Cause(o.queue))}
		}
		if err != nil {
			return nil, err
		}
		m.recoverOpen(ctx, e)
		// Written before the code reaches the kernel: from here on the id
		// has a recorded result, a running execution or a known loss,
		// never a second run.
		if !m.noIntents {
			err = m.store.BeginExecution(ctx, store.Intent{
				Namespace: m.ns, SessionID: e.id, SessionKey: key, ExecID: o.id,
				CodeSHA256: sum, Code: code, ContainerID: e.containerID, Owner: m.owner.id, Started: time.Now(),
			})
		}
		if errors.Is(err, store.ErrExists) && named && attempt < 3 {
			release() // another caller started it meanwhile: answer as it will
			continue
		}
		if errors.Is(err, store.ErrEnded) {
			// Another process's sweep evicted it as this call began: the
			// code never reached it, and runs in a fresh session that
			// says why the state is gone.
			m.endedElsewhere(ctx, e)
			release()
			if attempt < 3 {
				continue
			}
			return nil, &Error{Op: "exec", Key: key, ContainerID: e.containerID, Err: fmt.Errorf("%w: execution %s did not run: another process ended each session it was about to run in", ErrSessionLost, o.id)}
		}
		if err != nil {
			release()
			m.metrics.dbFailed("begin_execution")
			if diskFull(err) {
				// The tenant hears what is full, not where it is.
				return nil, &Error{Op: "exec", Key: key, ContainerID: e.containerID, Err: fmt.Errorf("%w on the disk of the database (ARTIFACTS_DB): record that execution %s starts (it did not run): %w", ErrNoSpace, o.id, m.storageTrouble(err, "the server's database"))}
			}
			return nil, &Error{Op: "exec", Key: key, ContainerID: e.containerID, Err: fmt.Errorf("record that execution %s starts (it did not run): %w", o.id, m.storageTrouble(err, "the server's database"))}
		}
		res, record, err := m.execute(ctx, e, code, o)
		if record == nil {
			release()
			return res, err
		}
		// The caller has its result now; the history row is written
		// after, with the session's turn still held, so that the
		// session's next call, a replay of the id or Close come after
		// it. The intent covers a crash meanwhile.
		m.calls.Add(1)
		go func() {
			defer m.calls.Done()
			defer release()
			record(context.WithoutCancel(ctx))
		}()
		return res, nil
	}
}

// unrecorded is a history row that failed to be written after its result
// returned, and why.
type unrecorded struct {
	rec *store.Execution
	why string
}

// recordPending records the executions of e whose record failed before
// (e's turn is held); what still fails waits for the next call. It returns
// what the caller's result says of them: their results had returned
// already, so this is the first call that can tell.
func (m *Manager) recordPending(ctx context.Context, e *entry) (warnings []string) {
	for len(e.unrecorded) > 0 {
		u := e.unrecorded[0]
		if err := m.store.RecordExecution(context.WithoutCancel(ctx), u.rec); err != nil {
			m.metrics.dbFailed("record_execution")
			m.log.WarnContext(ctx, "record execution", "session_key", e.key, "session_id", e.id, "exec_id", u.rec.ExecID, "err", err)
			for _, u := range e.unrecorded {
				warnings = append(warnings, fmt.Sprintf("the history did not record execution %s yet (%s); it is retried on the next call", u.rec.ExecID, m.storageTrouble(err, "the server's database")))
			}
			return warnings
		}
		m.metrics.dbRetried()
		warnings = append(warnings, fmt.Sprintf("the history recorded execution %s only now: when it ended, %s", u.rec.ExecID, u.why))
		e.unrecorded = e.unrecorded[1:]
	}
	return warnings
}

// diskFull reports whether err is a full disk: ENOSPC, or SQLite's
// SQLITE_FULL (which the store reports by its text).
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "database or disk is full")
}

// codeSum is the hex SHA-256 of code: what tells a retry from another use of
// the same execution id.
func codeSum(code string) string {
	h := sha256.Sum256([]byte(code))
	return hex.EncodeToString(h[:])
}

// execute runs code in e (its turn held) and returns its result and what
// records it in the history, which the caller runs, e's turn still held.
func (m *Manager) execute(ctx context.Context, e *entry, code string, o execOptions) (*Result, func(context.Context), error) {
	key := e.key
	late := m.recordPending(ctx, e)
	started := time.Now()
	req := kernel.ExecRequest{ID: o.id, Code: code, Timeout: o.timeout, ScanDir: ArtifactsDir, ScanMax: maxScan}
	kr, err := m.run(ctx, e, func(c *kernel.Client) (*kernel.Result, error) {
		return c.Execute(ctx, req, o.onEvent)
	}, func(c *kernel.Client) (*kernel.Result, error) {
		// The connection broke but the container lives: the kernel kept
		// the result (or is still running the code).
		kr, err := c.Fetch(ctx, o.id, o.onEvent)
		if errors.Is(err, kernel.ErrUnknownExecution) {
			// The request died with the stream before the init read
			// it: it never ran, so it runs now, under the same id
			// (the init runs an id once).
			return c.Execute(ctx, req, o.onEvent)
		}
		return kr, err
	})
	if err != nil {
		return nil, nil, &Error{Op: "exec", Key: key, ContainerID: e.containerID, Err: err}
	}
	res := fromKernel(key, kr)
	res.Warnings = append(res.Warnings, late...)
	if e.notice != "" {
		res.StateLost = true
		if res.RestartReason == "" {
			res.RestartReason = e.notice
		}
		e.notice = ""
	}
	// Even a result the kernel replays (its id ran there before this
	// process knew it) is recorded and ingested once it reaches the host.
	ictx, ispan := m.startSpan(ctx, SpanIngest, key)
	m.ingest(ictx, e, res, kr.Files, kr.More)
	m.endIngest(ispan, res)
	m.artifactsStored(key, res.Artifacts)
	return res, m.recorder(ctx, e, code, started, res, traceIDOf(ctx)), nil
}

// run calls do on the session's kernel. If the connection breaks, it tells a
// lost container (ErrSessionLost; the entry is dropped so the next call
// starts afresh) from a broken stream, after which it reconnects and calls
// again.
func (m *Manager) run(ctx context.Context, e *entry, do, again func(*kernel.Client) (*kernel.Result, error)) (*kernel.Result, error) {
	if e.client == nil {
		if err := m.reconnect(ctx, e); err != nil {
			return nil, err
		}
	}
	kr, err := do(e.client)
	if errors.Is(err, kernel.ErrUnresponsive) {
		return nil, m.lose(ctx, e, m.unresponsive(ctx, e.containerID, err))
	}
	if err == nil || !(errors.Is(err, kernel.ErrConnectionLost) || errors.Is(err, kernel.ErrClosed)) {
		return kr, err
	}
	e.client.Close()
	e.client = nil
	if rerr := m.reconnect(ctx, e); rerr != nil {
		return nil, rerr
	}
	kr, err = again(e.client)
	if errors.Is(err, kernel.ErrUnresponsive) {
		return nil, m.lose(ctx, e, m.unresponsive(ctx, e.containerID, err))
	}
	return kr, err
}

// unresponsive is the loss of a session whose init stopped answering:
// whatever it holds cannot be trusted to come back, so its container goes.
// A container that was killed or removed says so first (under gVisor its
// stream may not end, and the silence is all the client sees).
func (m *Manager) unresponsive(ctx context.Context, id string, err error) *lostError {
	var lost *lostError
	if errors.As(m.checkAlive(context.WithoutCancel(ctx), id), &lost) {
		return lost
	}
	return silentInit(id, err)
}

// silentInit is the loss of a session whose container lives but whose init
// does not answer.
func silentInit(id string, err error) *lostError {
	return &lostError{id: id, reason: fmt.Sprintf("stopped answering (%v), so it was removed", err)}
}

// reconnect dials the kernel of e's container again, or reports the session
// lost if the container is gone or dead.
func (m *Manager) reconnect(ctx context.Context, e *entry) error {
	client, err := m.dial(ctx, e.containerID)
	var lost *lostError
	if errors.As(err, &lost) {
		return m.lose(ctx, e, lost)
	}
	if err != nil {
		return err
	}
	e.client = client
	m.streamUp(e)
	return nil
}

// lose drops a session whose container is gone or dead and says so.
func (m *Manager) lose(ctx context.Context, e *entry, lost *lostError) error {
	m.mu.Lock()
	stopped := e.gone
	m.mu.Unlock()
	if exp := m.expiredUnder(ctx, e.id, e.containerID); exp != nil {
		if !stopped {
			m.drop(e)
		}
		return exp // its time to live ended: that, not the container's end, is the news
	}
	if stopped {
		// Stop or the idle sweep removed it on purpose, and recorded why.
		return &lostError{id: e.containerID, reason: "was stopped"}
	}
	if err := m.pausedNow(ctx, e); err != nil {
		return err // frozen, not dead: it answers again once resumed
	}
	m.drop(e)
	m.retire(e.containerID)
	m.markStopped(ctx, e.id, e.containerID, "lost: "+lost.reason)
	return lost
}

// expiredUnder returns the loss of session id's container as an expiry
// when its record says the time to live ended it (in this process or
// another: the reason is recorded before the container is removed), else
// nil.
func (m *Manager) expiredUnder(ctx context.Context, id, containerID string) *lostError {
	row, err := m.store.Session(context.WithoutCancel(ctx), m.ns, id)
	if err != nil || row.ContainerID != containerID || !strings.HasPrefix(row.StopReason, stopExpired) {
		return nil
	}
	return &lostError{id: containerID, reason: row.StopReason, expired: true}
}

// whyLost is err, or the expiry of session id when err is the loss of its
// container and the time to live ended it: what a call cut by the expiry
// says instead of "killed".
func (m *Manager) whyLost(ctx context.Context, id, containerID string, err error) error {
	var lost *lostError
	if errors.As(err, &lost) && !lost.expired {
		if exp := m.expiredUnder(ctx, id, containerID); exp != nil {
			return exp
		}
	}
	return err
}

// replay returns the recorded result of an execution id this session already
// ran, even if its kernel has since restarted or its container was replaced.
func (m *Manager) replay(ctx context.Context, key, id, code string) (*Result, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	rec, err := m.store.Execution(ctx, m.ns, ID(key), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{Op: "exec", Key: key, Err: err}
	}
	if len(code) <= m.store.MaxCode && rec.Code != code {
		return nil, &Error{Op: "exec", Key: key, Err: &kernel.ExecError{ID: id, Err: kernel.ErrIDConflict}}
	}
	return m.fromHistory(key, rec), nil
}

func fromRecord(key string, rec store.Execution) *Result {
	res := &Result{
		Session:         key,
		ID:              rec.ExecID,
		ExecutionCount:  rec.ExecutionCount,
		Stdout:          rec.Stdout,
		Stderr:          rec.Stderr,
		Outputs:         rec.Outputs,
		Error:           rec.Error,
		TimedOut:        rec.TimedOut,
		Interrupted:     rec.Interrupted,
		KernelRestarted: rec.KernelRestarted,
		StateLost:       rec.StateLost,
		Replayed:        true,
		Duration:        rec.Duration,
		Artifacts:       []Artifact{},
	}
	if res.Outputs == nil {
		res.Outputs = []kernel.Output{}
	}
	if len(rec.Artifacts) > 0 {
		_ = json.Unmarshal(rec.Artifacts, &res.Artifacts)
	}
	return res
}

// fromHistory is fromRecord with fresh download URLs.
func (m *Manager) fromHistory(key string, rec store.Execution) *Result {
	res := fromRecord(key, rec)
	m.resign(res.Artifacts)
	return res
}

// finish records a finished execution: the history row (with traceID, the
// trace it ran in, "" for none), the session's last use and, in BIND mode,
// the debugging files. A failure here loses no result, so it is logged, not
// returned: the row is kept and written on the session's next call, whose
// result says so (see recordPending).
func (m *Manager) finish(ctx context.Context, e *entry, code string, started time.Time, res *Result, traceID string) {
	m.recorder(ctx, e, code, started, res, traceID)(context.WithoutCancel(ctx))
}

// recorder is finish in two steps: what is recorded is taken from res now
// (the caller may change res once it has it), and written when the
// returned function runs, e's turn held.
func (m *Manager) recorder(ctx context.Context, e *entry, code string, started time.Time, res *Result, traceID string) func(context.Context) {
	now := time.Now()
	m.used(e, now, res.ExecutionCount)
	// The history keeps no URLs: they expire long before the record, and
	// a replay signs fresh ones.
	recorded := slices.Clone(res.Artifacts)
	for i := range recorded {
		recorded[i].URL = ""
	}
	arts, _ := json.Marshal(recorded)
	rec := &store.Execution{
		Namespace:       m.ns,
		SessionID:       e.id,
		SessionKey:      e.key,
		ExecID:          res.ID,
		ExecutionCount:  res.ExecutionCount,
		Code:            code,
		Stdout:          res.Stdout,
		Stderr:          res.Stderr,
		Outputs:         slices.Clone(res.Outputs),
		Error:           res.Error,
		Started:         started,
		Duration:        res.Duration,
		TimedOut:        res.TimedOut,
		Interrupted:     res.Interrupted,
		KernelRestarted: res.KernelRestarted,
		StateLost:       res.StateLost,
		Artifacts:       arts,
		TraceID:         traceID,
	}
	if m.cfg.SessionStorage == config.StorageBind {
		// Before the caller has res: the files are read as the
		// session's state (its metadata has the execution count).
		m.writeFiles(ctx, e, code, started, res, traceID)
	}
	return func(ctx context.Context) {
		// Also records the session's last use and execution count.
		if err := m.store.RecordExecution(ctx, rec); err != nil {
			// Kept, and recorded on the session's next call; the
			// intent covers a crash meanwhile.
			e.unrecorded = append(e.unrecorded, unrecorded{rec, "its row could not be written (" + m.storageTrouble(err, "the server's database").Error() + ")"})
			m.metrics.dbFailed("record_execution")
			m.log.WarnContext(ctx, "record execution", "session_key", e.key, "session_id", e.id, "exec_id", rec.ExecID, "err", err)
		}
	}
}

// Fetch returns the result of execution id in the session of key, waiting for
// it if it still runs: after a manager crashed mid-execution, a new one gets
// the result this way. It looks in the kernel first, then in the history.
// ErrUnknownExecution means neither knows the id.
func (m *Manager) Fetch(ctx context.Context, key, id string) (res *Result, err error) {
	ctx, span := m.startSpan(ctx, SpanFetch, key, semconv.GenAIToolCallID(id))
	defer func() { m.endExec(span, "", res, err) }()
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if res, err := m.known(ctx, "fetch", key, id, "", ""); res != nil || err != nil {
		return res, err
	}
	// No intent: an id run by an older manager, or straight through a
	// kernel client. The kernel may still hold it.
	e, release, err := m.acquire(ctx, key, false)
	if err == nil {
		defer release()
		fetch := func(c *kernel.Client) (*kernel.Result, error) { return c.Fetch(ctx, id, nil) }
		kr, err := m.run(ctx, e, fetch, fetch)
		if err == nil {
			return fromKernel(key, kr), nil
		}
		if !errors.Is(err, kernel.ErrUnknownExecution) && !errors.Is(err, ErrSessionLost) {
			return nil, &Error{Op: "fetch", Key: key, ContainerID: e.containerID, Err: err}
		}
	} else if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrSessionLost) {
		return nil, err
	}
	rec, err := m.store.Execution(ctx, m.ns, ID(key), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &Error{Op: "fetch", Key: key, Err: fmt.Errorf("%w: %s", ErrUnknownExecution, id)}
	}
	if err != nil {
		return nil, &Error{Op: "fetch", Key: key, Err: err}
	}
	return m.fromHistory(key, rec), nil
}
