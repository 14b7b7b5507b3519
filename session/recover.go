package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/kernel"
)

// An execution is written to the database as an intent before its code
// reaches the kernel (see store.Intent). Its id then has three honest
// answers, in any process: the recorded result, which is replayed; "still
// running", in which case the result is awaited, then recorded and its files
// ingested by whoever asks (the process that sent it may have died); or
// ErrOutcomeUnknown, once the session was lost before the result reached
// the history. Never a second run.

// known answers an execution id that was started before, or returns nil, nil
// when it never was. sum is the code's codeSum for a retry, whose code must
// be the same; "" for a fetch, which takes any.
func (m *Manager) known(ctx context.Context, op, key, id, code, sum string) (*Result, error) {
	if res, err := m.recorded(ctx, op, key, id, code, sum); res != nil || err != nil {
		return res, err
	}
	in, err := m.store.Intent(ctx, m.ns, ID(key), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{Op: op, Key: key, Err: err}
	}
	switch {
	case sum != "" && in.CodeSHA256 != sum:
		return nil, &Error{Op: op, Key: key, Err: &kernel.ExecError{ID: id, Err: kernel.ErrIDConflict}}
	case in.Recorded: // recorded between the two reads
		rec, err := m.store.Execution(ctx, m.ns, ID(key), id)
		if err != nil {
			return nil, &Error{Op: op, Key: key, Err: err}
		}
		return m.fromHistory(key, rec), nil
	case in.Lost != "":
		return nil, &Error{Op: op, Key: key, Err: outcomeUnknown(in)}
	}
	e, release, err := m.acquire(ctx, key, false)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrSessionLost) {
		in.Lost = "the session was lost while it ran"
		m.loseIntent(ctx, in)
		return nil, &Error{Op: op, Key: key, Err: errors.Join(outcomeUnknown(in), err)}
	}
	if err != nil {
		return nil, err
	}
	defer release()
	// This process returns a result before its row is written, which it
	// does with the session's turn held: now that the turn is ours, the
	// row of a result that returned is there.
	if res, err := m.recorded(ctx, op, key, id, code, sum); res != nil || err != nil {
		return res, err
	}
	return m.recoverOne(ctx, e, in, !m.owner.otherAlive(in.Owner))
}

// recorded is the result of id from the history, or nil, nil when the
// history has none; see known for sum.
func (m *Manager) recorded(ctx context.Context, op, key, id, code, sum string) (*Result, error) {
	if sum != "" {
		return m.replay(ctx, key, id, code)
	}
	rec, err := m.store.Execution(ctx, m.ns, ID(key), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{Op: op, Key: key, Err: err}
	}
	return m.fromHistory(key, rec), nil
}

func outcomeUnknown(in store.Intent) error {
	return fmt.Errorf("%w: execution %s: %s", ErrOutcomeUnknown, in.ExecID, in.Lost)
}

func (m *Manager) loseIntent(ctx context.Context, in store.Intent) {
	if err := m.store.LoseIntents(context.WithoutCancel(ctx), in.Namespace, in.SessionID, in.ExecID, in.Lost); err != nil {
		m.log.Warn("record a lost execution", "session_id", in.SessionID, "exec_id", in.ExecID, "err", err)
	}
}

// recoverOpen finishes, once per process and session, the executions a
// manager that died left without a recorded result: each is fetched from
// the kernel (waiting for it if it still runs), recorded, and its files
// ingested; one the kernel no longer knows is recorded as lost. e's turn is
// held. A failure is logged and tried again on the next call.
func (m *Manager) recoverOpen(ctx context.Context, e *entry) {
	if e.recovered {
		return
	}
	open, err := m.store.OpenIntents(ctx, m.ns, e.id)
	if err != nil {
		m.log.Warn("look for unfinished executions", "session_id", e.id, "err", err)
		return
	}
	done := true
	for _, in := range open {
		if m.owner.otherAlive(in.Owner) {
			done = false // its own process is on it, and records it
			continue
		}
		if _, err := m.recoverOne(ctx, e, in, true); err != nil && !errors.Is(err, ErrOutcomeUnknown) {
			m.log.Warn("finish an execution a dead manager left", "session_id", e.id, "exec_id", in.ExecID, "err", err)
			return
		}
	}
	e.recovered = done
}

// recoverOne gets the result of an open intent from e's kernel (e's turn is
// held), waiting for it if it still runs, and returns it as replayed. When
// finish is set (no other live process owns it) it also records the result
// and ingests its files.
func (m *Manager) recoverOne(ctx context.Context, e *entry, in store.Intent, finish bool) (*Result, error) {
	lost := func(reason string, cause error) (*Result, error) {
		in.Lost = reason
		m.loseIntent(ctx, in)
		return nil, &Error{Op: "exec", Key: e.key, ContainerID: e.containerID, Err: errors.Join(outcomeUnknown(in), cause)}
	}
	if e.containerID != in.ContainerID {
		return lost(fmt.Sprintf("container %s, which ran it, was replaced by %s", shortID(in.ContainerID), shortID(e.containerID)), nil)
	}
	fetch := func(c *kernel.Client) (*kernel.Result, error) { return c.Fetch(ctx, in.ExecID, nil) }
	kr, err := m.run(ctx, e, fetch, fetch)
	switch {
	case errors.Is(err, kernel.ErrUnknownExecution):
		return lost("its kernel no longer holds the result", nil)
	case errors.Is(err, ErrSessionLost):
		return lost("the session was lost while it ran", err)
	case err != nil:
		return nil, &Error{Op: "exec", Key: e.key, ContainerID: e.containerID, Err: err}
	}
	res := fromKernel(e.key, kr)
	if finish {
		m.ingest(ctx, e, res, kr.Files, kr.More)
		// No trace id: the trace it ran in is the dead manager's, which
		// the intent does not keep, not the one of the call recovering it.
		m.finish(ctx, e, in.Code, in.Started, res, "")
	}
	res.Replayed = true
	return res, nil
}
