package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/session/driver"
)

// Lifecycle: a session may be paused (its container frozen, memory kept)
// and resumed, and may have a time to live, extended by Renew. Both live
// where every process sees them: the pause in the engine and the database,
// the expiry in the database (and, as first set, on the container's
// labels). A paused session is refused, with ErrPaused, by every call that
// would reach its kernel (Exec, Inspect, Fetch, ...): it is not resumed
// behind the caller's back, since whoever paused it meant it to stay
// frozen; Resume first. The idle sweep leaves it alone; its time to live
// still runs.

var (
	// ErrPaused means the session is paused: calls that reach its kernel
	// or its files are refused until Resume (nothing thaws it behind the
	// back of whoever paused it).
	ErrPaused = driver.ErrPaused
	// ErrExpired means the session's time to live ran out: it is (being)
	// removed, and cannot be renewed. The next Exec on the key starts a
	// fresh session, and its result says so.
	ErrExpired = errors.New("session expired")
	// ErrBusy means another process is running an execution in the
	// session, so it cannot be paused now.
	ErrBusy = errors.New("session busy in another process")
)

// States of a session as Info reports them.
const (
	StateRunning = "running"
	StatePaused  = "paused"
	StateStopped = "stopped" // ended on purpose: Stop, idle, expired
	StateLost    = "lost"    // its container died or was removed from outside
	// StateExpired is List's state of a session past its time to live
	// whose container no sweep has removed yet: it will never run code
	// again (Info says StateStopped, with the expiry as StopReason).
	StateExpired = "expired"
)

// stopExpired begins the stop reason of an expired session.
const stopExpired = "expired"

func pausedError(containerID string) error {
	return fmt.Errorf("%w: container %s is frozen: resume it first (Manager.Resume, agentbox resume KEY)", ErrPaused, shortID(containerID))
}

// Pause freezes the session of key: every process in its container stops
// where it is, its memory (the Python state) is kept, and it uses no CPU
// until Resume. It waits for this process's calls on the session to end
// (until ctx does); ErrBusy if another process is running an execution in
// it. Pausing a paused session is no error. ErrNotFound if the key has no
// session.
func (m *Manager) Pause(ctx context.Context, key string) (err error) {
	ctx, span := m.startSpan(ctx, SpanPause, key)
	defer func() { endSpan(span, err) }()
	if err := m.begin(); err != nil {
		return err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return err
	}
	p, c, err := m.lifecycleTarget(ctx, "pause", key)
	if err != nil {
		return err
	}
	id := ID(key)
	fail := func(err error) error { return &Error{Op: "pause", Key: key, ContainerID: c.ID, Err: err} }
	if c.Paused {
		m.recordPause(ctx, id, time.Now())
		return nil
	}
	m.mu.Lock()
	e := m.sessions[id]
	m.mu.Unlock()
	if e != nil {
		select {
		case e.turn <- struct{}{}:
			defer func() { <-e.turn }()
		case <-ctx.Done():
			return fail(fmt.Errorf("wait for the calls on it to end: %w", ctx.Err()))
		}
	}
	if m.busyElsewhere(ctx, id) {
		return fail(ErrBusy)
	}
	// Recorded first: from here on, a call in any process is refused
	// before it writes to a kernel that will not answer.
	if err := m.store.SetPaused(ctx, m.ns, id, time.Now()); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fail(fmt.Errorf("record the pause: %w", err))
	}
	err = m.bumpEpoch()
	if err == nil {
		err = p.Pause(ctx, c.ID) // the driver retries a freezer that gave up
	}
	if err != nil {
		if err = m.raced(ctx, c, true, err); err == nil {
			return nil // another process paused it meanwhile
		}
		if cerr := m.store.SetPaused(context.WithoutCancel(ctx), m.ns, id, time.Time{}); cerr != nil && !errors.Is(cerr, store.ErrNotFound) {
			err = errors.Join(err, fmt.Errorf("undo the recorded pause: %w", cerr))
		}
		err = errors.Join(err, m.bumpEpoch())
		return fail(err)
	}
	return nil
}

// recordPause makes the database agree with an engine that shows the
// session paused (by another process, or by docker pause); best effort.
func (m *Manager) recordPause(ctx context.Context, id string, at time.Time) {
	row, err := m.store.Session(ctx, m.ns, id)
	// A pause by the idle sweep becomes the caller's: it stays.
	if err != nil || (!row.Paused.IsZero() && row.PauseReason != store.PauseIdle) {
		return
	}
	if err := m.store.SetPaused(ctx, m.ns, id, at); err != nil {
		m.log.Warn("record a pause", "session_id", id, "err", err)
	}
	if err := m.bumpEpoch(); err != nil {
		m.log.Warn("record a pause", "session_id", id, "err", err)
	}
}

// Resume thaws the paused session of key, its processes and Python state
// as they were, and counts as a use of it (the idle timeout starts again).
// Resuming a running session is no error. ErrNotFound if the key has no
// session.
func (m *Manager) Resume(ctx context.Context, key string) (err error) {
	ctx, span := m.startSpan(ctx, SpanResume, key)
	defer func() { endSpan(span, err) }()
	if err := m.begin(); err != nil {
		return err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return err
	}
	p, c, err := m.lifecycleTarget(ctx, "resume", key)
	if err != nil {
		return err
	}
	id := ID(key)
	if c.Paused {
		if err := p.Unpause(ctx, c.ID); err != nil {
			if err = m.raced(ctx, c, false, err); err != nil {
				return &Error{Op: "resume", Key: key, ContainerID: c.ID, Err: err}
			}
			// Another process resumed it meanwhile.
		}
	}
	now := time.Now()
	if err := m.store.ResumeSession(ctx, m.ns, id, now); err != nil && !errors.Is(err, store.ErrNotFound) {
		return &Error{Op: "resume", Key: key, ContainerID: c.ID, Err: fmt.Errorf("record the resume (the container runs): %w", err)}
	}
	if err := m.bumpEpoch(); err != nil {
		return &Error{Op: "resume", Key: key, ContainerID: c.ID, Err: fmt.Errorf("record the resume (the container runs): %w", err)}
	}
	m.mu.Lock()
	if e := m.sessions[id]; e != nil && now.After(e.lastUsed) {
		e.lastUsed = now
	}
	m.mu.Unlock()
	return nil
}

// raced says why the engine refused to pause (paused true) or resume
// container c, by looking at it again: another client did it already
// (nil), it was removed meanwhile (ErrNotFound), it stopped (a *lostError,
// ErrSessionLost); else err, the engine's own answer. The engine's error
// text ("already paused", "No such container") is never what decides.
func (m *Manager) raced(ctx context.Context, c Container, paused bool, err error) error {
	ctx = context.WithoutCancel(ctx)
	// A container being killed (a Stop racing) refuses at once ("not
	// running") while the engine still shows it running for a moment:
	// look a few times before calling the refusal the engine's own.
	for look := 0; ; look++ {
		now, ierr := m.drv.Inspect(ctx, c.ID)
		switch {
		case errors.Is(ierr, ErrContainerNotFound):
			return fmt.Errorf("%w: its container %s was removed meanwhile", ErrNotFound, shortID(c.ID))
		case ierr != nil:
			return errors.Join(err, ierr)
		case !now.Running:
			return &lostError{id: c.ID, reason: deathReason(now, m.image.ID)}
		case now.Paused == paused:
			return nil
		case look == racedLooks:
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// racedLooks is how often raced looks again at a container that refused
// a pause or resume and still runs (100 ms apart).
const racedLooks = 10

// lifecycleTarget returns the driver's pauser and the running (or paused)
// container of key's session.
func (m *Manager) lifecycleTarget(ctx context.Context, op, key string) (pauser, Container, error) {
	p, ok := m.drv.(pauser)
	if !ok {
		return nil, Container{}, &Error{Op: op, Key: key, Err: fmt.Errorf("the sandbox driver cannot pause containers: %w", errors.ErrUnsupported)}
	}
	c, err := m.drv.Inspect(ctx, m.containerName(ID(key)))
	switch {
	case errors.Is(err, ErrContainerNotFound):
		return nil, Container{}, &Error{Op: op, Key: key, Err: ErrNotFound}
	case err != nil:
		return nil, Container{}, &Error{Op: op, Key: key, Err: err}
	case !c.Running:
		return nil, Container{}, &Error{Op: op, Key: key, ContainerID: c.ID, Err: &lostError{id: c.ID, reason: deathReason(c, m.image.ID)}}
	}
	return p, c, nil
}

// Renew sets the session's expiry to d from now (at most
// SESSION_MAX_TTL_S), whatever its time to live was (none included), and
// returns it. A paused session may be renewed. ErrExpired once the expiry
// has passed, even if the sweep has not removed the session yet;
// ErrNotFound if the key has no session.
func (m *Manager) Renew(ctx context.Context, key string, d time.Duration) (_ time.Time, err error) {
	ctx, span := m.startSpan(ctx, SpanRenew, key)
	defer func() { endSpan(span, err) }()
	if err := m.begin(); err != nil {
		return time.Time{}, err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return time.Time{}, err
	}
	fail := func(err error) (time.Time, error) { return time.Time{}, &Error{Op: "renew", Key: key, Err: err} }
	if d <= 0 {
		return fail(&OptionError{Option: "renew", Want: d.String() + ": want more than 0", Err: ErrInvalidOption})
	}
	if err := checkTTL("renew", d, m.cfg.MaxSessionTTL); err != nil {
		return fail(err)
	}
	if _, err := m.drv.Inspect(ctx, m.containerName(ID(key))); errors.Is(err, ErrContainerNotFound) {
		return fail(ErrNotFound)
	} else if err != nil {
		return fail(err)
	}
	now := time.Now()
	exp := now.Add(d)
	err = m.store.RenewSession(ctx, m.ns, ID(key), exp, now)
	switch {
	case errors.Is(err, store.ErrExpired):
		return fail(fmt.Errorf("%w: %w", ErrExpired, err))
	case errors.Is(err, store.ErrNotFound):
		return fail(fmt.Errorf("%w: %w", ErrNotFound, err))
	case err != nil:
		return fail(err)
	}
	if err := m.bumpEpoch(); err != nil {
		return fail(fmt.Errorf("renewed to %s, but other processes may not see it before their next database read: %w", exp.Format(time.RFC3339), err))
	}
	return exp, nil
}

// checkLive refuses a session that the database says is paused, or that
// is past its expiry (removed on the way), or whose container another
// process ended or replaced (an *endedError: the caller drops e). held
// says whether the caller holds e's turn.
// The database is asked, not this process's memory, so a pause or renewal
// by another process counts at once. Unsure is live: the engine decides.
func (m *Manager) checkLive(ctx context.Context, e *entry, held bool) error {
	row, err := m.liveness(ctx, e)
	if err != nil {
		return nil
	}
	if row.ContainerID != e.containerID || row.Stopped {
		ended := &endedError{old: e.containerID}
		if row.ContainerID != e.containerID {
			ended.now = row.ContainerID
		}
		return ended
	}
	// The idle sweep's pause is undone by the next call (below); a
	// caller's never is.
	idlePaused := !row.Paused.IsZero() && row.PauseReason == store.PauseIdle
	if !row.Paused.IsZero() && !idlePaused {
		return &Error{Op: "open", Key: e.key, ContainerID: e.containerID,
			Err: fmt.Errorf("%w since %s: resume it first (Manager.Resume, agentbox resume KEY)", ErrPaused, row.Paused.Local().Format(time.RFC3339))}
	}
	if !pastExpiry(row.Expires, time.Now()) {
		if !idlePaused {
			return nil
		}
		if err := m.resumeIdle(ctx, e.key, e.id, e.containerID); err != nil {
			return err
		}
		m.mu.Lock()
		e.live = nil // read the resume next time
		m.mu.Unlock()
		return nil
	}
	if !m.expire(ctx, e.id, e.containerID, row.Expires, e, true, held) {
		m.mu.Lock()
		e.live = nil // renewed meanwhile: read the new expiry next time
		m.mu.Unlock()
		return nil
	}
	return &Error{Op: "open", Key: e.key, ContainerID: e.containerID, Err: fmt.Errorf("%w at %s (its time to live)", ErrExpired, row.Expires.Local().Format(time.RFC3339))}
}

// maxEndedElsewhere bounds how often one call drops an entry that another
// process ended and opens the key anew.
const maxEndedElsewhere = 2

// endedError means that another process ended the session of container old
// (stopped, evicted or expired it) since this process last used it, and
// started container now in its place if now is set.
type endedError struct{ old, now string }

func (e *endedError) Error() string {
	if e.now != "" {
		return fmt.Sprintf("container %s replaced by %s in another process", shortID(e.old), shortID(e.now))
	}
	return fmt.Sprintf("container %s ended in another process", shortID(e.old))
}

// endedElsewhere drops e (its turn held), whose container another process
// ended or replaced (checkLive's *endedError, or store.ErrEnded). The
// client's stream may not show the end yet: left in place, e would send
// the next call to a removed container and fail it, where the call after
// this process's own eviction runs in a fresh session that says why the
// state is gone. The caller opens the key anew.
func (m *Manager) endedElsewhere(ctx context.Context, e *entry) {
	m.drop(e)
	m.recordPending(ctx, e)
	if e.client != nil {
		e.client.Close()
		e.client = nil
	}
}

// endReason is the notice for the state of container ee.old, which another
// process ended or replaced: the reason its row records when it still
// names it.
func (m *Manager) endReason(ctx context.Context, id string, ee *endedError) string {
	if ee.now != "" {
		return "the session's container " + shortID(ee.old) + " ended and another process started " + shortID(ee.now) + " in its place" + freshSuffix
	}
	row, err := m.store.Session(ctx, m.ns, id)
	if err == nil && row.ContainerID == ee.old && row.StopReason != "" {
		if n := freshNotice(row.StopReason); n != "" {
			return n
		}
		return "the session's container " + shortID(ee.old) + " ended in another process (" + row.StopReason + ")" + freshSuffix
	}
	return "the session's container " + shortID(ee.old) + " ended in another process" + freshSuffix
}

// freshSuffix ends the notice of a session started in place of another.
const freshSuffix = "; this is a fresh session, and variables and imports from before are gone"

// expireIfDue removes the session container c (id) if its expiry has
// passed, whatever it is doing: the time to live is a hard limit, where
// the idle timeout is not. It reports whether it did.
func (m *Manager) expireIfDue(ctx context.Context, id string, c Container, row store.Session, now time.Time) bool {
	recorded := row.ContainerID == c.ID
	exp := labelExpiry(c)
	if recorded {
		exp = row.Expires // renewals live here
	}
	if !pastExpiry(exp, now) {
		return false
	}
	m.mu.Lock()
	e := m.sessions[id]
	m.mu.Unlock()
	return m.expire(ctx, id, c.ID, exp, e, recorded, false)
}

// expiredReason is the stop reason of a session whose time to live ended
// at exp.
func expiredReason(exp time.Time) string {
	return fmt.Sprintf("%s: its time to live ended at %s", stopExpired, exp.Local().Format(time.RFC3339))
}

// pastExpiry reports whether a session expiring at exp (zero: never) has
// expired at now.
func pastExpiry(exp, now time.Time) bool { return !exp.IsZero() && !now.Before(exp) }

// expire removes session id's container containerID, past its expiry exp.
// With a record, the database decides first (in one statement, against a
// renewal); one that another process expired counts as expired. e is this
// process's entry, if any: it is dropped, and its client closed if idle
// (its turn is taken here unless the caller holds it: held).
func (m *Manager) expire(ctx context.Context, id, containerID string, exp time.Time, e *entry, recorded, held bool) bool {
	now := time.Now()
	reason := expiredReason(exp)
	if recorded {
		ok, err := m.store.ExpireSession(ctx, m.ns, id, containerID, now, reason)
		if err != nil {
			m.log.Warn("expire session", "session_id", id, "err", err)
			return false
		}
		if !ok {
			row, err := m.store.Session(ctx, m.ns, id)
			if err != nil || row.Stopped.IsZero() {
				return false // renewed
			}
		}
	}
	// Only the entry of this container: one still opening, or opened on
	// the key's next container, is not this session's (dropping it would
	// lose what its first result says about this one); checkLive finds
	// the end when it opens this container.
	if e != nil && (held || e.holds(containerID)) {
		m.drop(e)
		if held {
			closeClient(e)
		} else {
			select {
			case e.turn <- struct{}{}:
				closeClient(e)
				<-e.turn
			default:
				// A call in flight sees its stream end with the
				// container, and closes its client itself.
			}
		}
	}
	m.log.Info("expire session", "session_id", id, "container_id", shortID(containerID), "expired", exp)
	if err := m.drv.Remove(context.WithoutCancel(ctx), containerID); err != nil && !errors.Is(err, ErrContainerNotFound) {
		m.log.Warn("expire session", "session_id", id, "err", err)
	}
	m.markStopped(ctx, id, containerID, reason)
	if err := m.bumpEpoch(); err != nil {
		m.log.Warn("expire session", "session_id", id, "err", err)
	}
	return true
}

// pausedNow reports, as ErrPaused, that e's container (its turn held) is
// frozen: a kernel that stopped answering is then paused, not dead, and
// its client is closed for a new one after Resume.
func (m *Manager) pausedNow(ctx context.Context, e *entry) error {
	c, err := m.drv.Inspect(context.WithoutCancel(ctx), e.containerID)
	if err != nil || !c.Paused {
		return nil
	}
	closeClient(e)
	return pausedError(c.ID)
}

// closeClient closes e's kernel client (e's turn held).
func closeClient(e *entry) {
	if e.client != nil {
		e.client.Close()
		e.client = nil
	}
}

// warm returns a warm container for e, or nil: one made with the defaults
// cannot serve a session asking for other options.
func (m *Manager) warm(e *entry) *pooled {
	if e.cr != nil && e.cr.custom {
		return nil
	}
	if m.diskLimited() && m.ranBefore(e.id) {
		// The key's files are on a disk of their own (or are to be moved
		// onto one), which a started container cannot be given.
		return nil
	}
	return m.pool.take()
}

// freshNotice is what the first result of a fresh session says about the
// one before it, which ended for reason; "" when nothing needs saying.
func freshNotice(reason string) string {
	switch {
	case strings.HasPrefix(reason, stopIdle):
		return "the session " + strings.TrimPrefix(strings.TrimPrefix(reason, stopIdle), ": ") + freshSuffix
	case strings.HasPrefix(reason, stopExpired):
		return "the session " + reason + freshSuffix
	}
	return ""
}
