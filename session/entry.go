package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/kernel"
	"go.opentelemetry.io/otel/trace"
)

// startTimeout bounds creating a container and reaching its kernel.
const startTimeout = 2 * time.Minute

// An init has helloTimeout to greet a new connection. Past that the host
// looks at it: a stopped init is given up at once; one that runs is
// waited for (its bridge may be slow to start on a loaded machine, and
// giving up would remove the session's state with its container), up to
// helloLimit.
const (
	helloTimeout = 10 * time.Second
	helloLimit   = time.Minute
)

// interruptMargin is what an init may take, beyond the grace period, to
// report an execution it interrupted or killed.
const interruptMargin = 3 * time.Second

// entry is one session known to this process.
type entry struct {
	key, id string
	ready   chan struct{} // closed when open finished; err says how
	err     error
	turn    chan struct{} // one slot: whoever holds it may use the session

	// Guarded by turn.
	containerID string
	client      *kernel.Client
	created     time.Time
	execCount   int
	files       map[string]stamp // /session/artifacts after the last execution
	recovered   bool             // the executions a dead manager left are finished
	notice      string           // said in the next result: why the state from before is gone
	unrecorded  []unrecorded     // results the history failed to record, retried on the next call
	lastExec    lastExec         // guarded by Manager.mu
	up          upStream         // guarded by Manager.mu: the stream Status trusts
	ingested    int64            // artifact bytes of the session so far
	hostRoot    string           // /proc/<pid>/root of the container, when readable here
	cr          *creation        // what a new container is made with (per-session options); nil: the defaults
	live        *store.Liveness  // the database's pause and expiry of it, as of liveEpoch (see liveness)
	liveEpoch   string

	// Guarded by Manager.mu.
	lastUsed time.Time
	usedRow  time.Time // the last use markUsed wrote to the session's row
	commands int       // shell commands running in it (see Run): it is in use
	gone     bool      // dropped from the map: take a new entry
}

// acquire returns the key's session, opening (and, when create is set,
// creating) it, with its turn held: call release when done.
func (m *Manager) acquire(ctx context.Context, key string, create bool) (*entry, func(), error) {
	return m.acquireWith(ctx, key, create, nil)
}

// acquireWith is acquire creating a new session with cr (nil: the
// defaults). A session paused, or past its expiry, in any process is
// refused here, before anything reaches its kernel (see checkLive).
func (m *Manager) acquireWith(ctx context.Context, key string, create bool, cr *creation) (*entry, func(), error) {
	if err := checkKey(key); err != nil {
		return nil, nil, err
	}
	var (
		endedFrom *endedError // the first entry another process ended or replaced
		endedWhy  string      // the notice for the state it held
	)
	for ended := 0; ; {
		e, err := m.entry(ctx, key, create, cr)
		if err != nil {
			return nil, nil, err
		}
		select {
		case e.turn <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if err := ctx.Err(); err != nil {
			// Both were ready and the turn won: a caller that left never
			// runs anything.
			<-e.turn
			return nil, nil, err
		}
		m.mu.Lock()
		gone, closed := e.gone, m.closed
		m.mu.Unlock()
		if closed {
			<-e.turn
			return nil, nil, ErrClosed
		}
		if gone {
			<-e.turn
			continue
		}
		err = m.checkLive(ctx, e, true)
		var ee *endedError
		if errors.As(err, &ee) && ended >= maxEndedElsewhere {
			// An entry just opened whose row could not be written would
			// otherwise be dropped again and again: the engine decides.
			err = nil
		}
		if errors.As(err, &ee) {
			m.endedElsewhere(ctx, e)
			<-e.turn
			if ended++; ended == 1 {
				// What this process's callers last saw: their state
				// goes with it, whatever the next round opens.
				endedFrom, endedWhy = ee, m.endReason(ctx, e.id, ee)
			}
			continue
		}
		if err != nil {
			<-e.turn
			if errors.Is(err, ErrExpired) && create {
				continue // removed: the next round makes a fresh one
			}
			return nil, nil, err
		}
		if endedFrom != nil && e.containerID != endedFrom.old && e.notice == "" {
			// Opened on another container than the one this process
			// used: never a silent fresh start, whoever started it.
			e.notice = endedWhy
		}
		return e, func() { <-e.turn }, nil
	}
}

// entry returns the key's entry once it is open. Concurrent callers for a new
// key share one opening, which runs on the Manager's lifetime so that one
// caller giving up does not fail the others.
func (m *Manager) entry(ctx context.Context, key string, create bool, cr *creation) (*entry, error) {
	id := ID(key)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	e := m.sessions[id]
	if e == nil {
		if cr == nil {
			cr = m.defaults
		}
		e = &entry{key: key, id: id, ready: make(chan struct{}), turn: make(chan struct{}, 1), cr: cr}
		m.sessions[id] = e
		e.turn <- struct{}{} // held while opening, so the sweep keeps off
		caller := trace.SpanContextFromContext(ctx)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer func() { <-e.turn }()
			// On the Manager's lifetime, in the trace of the first caller.
			ctx, cancel := context.WithTimeout(trace.ContextWithSpanContext(m.bg, caller), startTimeout)
			defer cancel()
			ctx, span := m.startSpan(ctx, SpanOpen, key)
			e.err = m.open(ctx, e, create)
			if errors.Is(e.err, ErrNotFound) {
				span.End() // a lookup of a key without a session: no failure
			} else {
				endSpan(span, e.err)
			}
			if e.err != nil {
				m.drop(e)
			}
			close(e.ready)
		}()
	}
	m.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil {
		if errors.Is(e.err, ErrNotFound) {
			if create {
				// A lookup-only caller opened it first; now create it.
				return m.entry(ctx, key, create, cr)
			}
			return nil, e.err
		}
		return nil, &Error{Op: "start", Key: key, Err: e.err}
	}
	return e, nil
}

// holds reports whether e has opened, on container containerID. Its
// container id is set before it is ready and never changes after.
func (e *entry) holds(containerID string) bool {
	select {
	case <-e.ready:
		return e.err == nil && e.containerID == containerID
	default:
		return false
	}
}

// drop forgets e so that the next call on its key opens the session anew.
func (m *Manager) drop(e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.gone = true
	if m.sessions[e.id] == e {
		delete(m.sessions, e.id)
	}
}

// open finds the key's container and connects to its kernel, or creates one.
// A container that disappeared or died since the last use is reported once
// as ErrSessionLost.
func (m *Manager) open(ctx context.Context, e *entry, create bool) error {
	name := m.containerName(e.id)
	for attempt := 0; ; attempt++ {
		c, err := m.drv.Inspect(ctx, name)
		switch {
		case err == nil && c.Paused:
			// Paused by the idle sweep: thawed for this call. Else
			// frozen, its kernel unreachable until Resume; never judged
			// dead for it.
			if attempt < maxNameRaces && m.pausedByIdleRow(ctx, e.id, c.ID) {
				if err := m.resumeIdle(ctx, e.key, e.id, c.ID); err != nil {
					return err
				}
				continue
			}
			return pausedError(c.ID)
		case err == nil && m.usable(c):
			if reason, ended := m.recordedEnd(ctx, e.id, c.ID); !ended || !decidedEnd(reason) {
				err := m.attach(ctx, e, c)
				if !errors.Is(err, errEndDecided) {
					return err
				}
				// Decided while attaching (a sweep expired or evicted
				// it): as below.
			}
			// Running, but another process decided its end (an idle
			// eviction, a stop, an expiry) and is about to remove it:
			// attaching would record it live again, under a container
			// that goes. Removed here as well, then started afresh with
			// that reason.
			if attempt >= maxNameRaces {
				return fmt.Errorf("container %s: its end is recorded, but it still runs", shortID(c.ID))
			}
			if rmErr := m.drv.Remove(ctx, c.ID); rmErr != nil && !errors.Is(rmErr, ErrContainerNotFound) {
				m.log.Warn("remove a container whose end is recorded", "session_id", e.id, "container_id", shortID(c.ID), "err", rmErr)
			}
			continue
		case err == nil && (c.Status == "created" || c.Status == "removing"):
			// Another process is between create and start, or removing
			// it: never judged dead while it may still start.
			if err := m.settle(ctx, c); err != nil {
				return err
			}
			continue
		case err == nil && !c.Running && (c.Status == "dead" || !m.servedBy(ctx, e.id, c.ID)):
			// Being removed ("dead" is how Docker's inspect shows a
			// removal under way, never "removing"): whoever removes it
			// records why, and the row says so once it is gone (below:
			// a fresh start with that reason, or the loss). Or never
			// recorded as this key's container: its start failed, or
			// its init died before its creator recorded it, so no call
			// ever ran in it and nothing is lost. Either way, once it
			// is gone, the key opens afresh. CI saw seven racers fail
			// on a failed start being removed: on an
			// engine that refuses the init's oom_score_adj -1000, each
			// new Manager's first start fails (exit code 128) and its
			// creator removes it before starting one without.
			if attempt >= maxNameRaces {
				return fmt.Errorf("container %s %s, and still shown after %d removals", shortID(c.ID), deathReason(c, m.image.ID), attempt)
			}
			if rmErr := m.drv.Remove(ctx, c.ID); rmErr != nil {
				return fmt.Errorf("container %s %s: remove it: %w", shortID(c.ID), deathReason(c, m.image.ID), rmErr)
			}
			continue
		case err == nil:
			// Stopped, killed, or from an image this program cannot use:
			// its state is gone either way.
			reason := deathReason(c, m.image.ID)
			_, ended := m.recordedEnd(ctx, e.id, c.ID)
			if rmErr := m.drv.Remove(ctx, c.ID); rmErr != nil && !ended {
				return rmErr
			}
			if ended && attempt < maxNameRaces {
				// Another process ended it on purpose (stopped, evicted,
				// expired), recorded why, and is removing it: not a loss
				// to report, but a fresh start that gives that reason,
				// once the engine no longer shows it.
				select {
				case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
				continue
			}
			m.markStopped(ctx, e.id, c.ID, "lost: "+reason)
			return fmt.Errorf("%w: container %s %s", ErrSessionLost, shortID(c.ID), reason)
		case !errors.Is(err, ErrContainerNotFound):
			return err
		}
		row, rerr := m.store.Session(ctx, m.ns, e.id)
		if rerr == nil && row.Stopped.IsZero() {
			m.markStopped(ctx, e.id, row.ContainerID, "lost: removed")
			return fmt.Errorf("%w: container %s was removed", ErrSessionLost, shortID(row.ContainerID))
		}
		if !create {
			if rerr == nil && strings.HasPrefix(row.StopReason, stopExpired) {
				// Whether or not a sweep removed it yet, a lookup of a
				// key whose session expired says so (and is still "no
				// such session" to callers that only ask that).
				return &Error{Op: "open", Key: e.key, ContainerID: row.ContainerID,
					Err: fmt.Errorf("%w: %s (%w)", ErrExpired, strings.TrimPrefix(row.StopReason, stopExpired+": "), ErrNotFound)}
			}
			return ErrNotFound
		}
		// The one door every new session passes, whichever API asked.
		admitted, err := m.admitSession(ctx, e)
		if err != nil {
			return err
		}
		err = m.create(ctx, e)
		admitted()
		if err == nil && rerr == nil {
			// Never a silent fresh start: the first result says so.
			e.notice = freshNotice(row.StopReason)
		}
		if errors.Is(err, ErrNameInUse) && attempt < maxNameRaces {
			// Another process created it first: use theirs, once the
			// engine shows it (it holds the name a moment before).
			select {
			case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		return err
	}
}

// servedBy reports whether session id's row names container containerID,
// so that calls may have run in it. A row the store cannot read counts as
// naming it: a loss is never hidden for a database that did not answer.
func (m *Manager) servedBy(ctx context.Context, id, containerID string) bool {
	row, err := m.store.Session(ctx, m.ns, id)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	return err != nil || row.ContainerID == containerID
}

// recordedEnd returns the stop reason session id's row records for
// container containerID, and whether it records an end of that container
// at all. A running container recorded as lost, not ended by a decision
// (see decidedEnd), was recorded wrongly: an older agentbox ended the row
// of whatever container replaced the one it lost.
func (m *Manager) recordedEnd(ctx context.Context, id, containerID string) (string, bool) {
	row, err := m.store.Session(ctx, m.ns, id)
	if err != nil || row.ContainerID != containerID || row.Stopped.IsZero() {
		return "", false
	}
	return row.StopReason, true
}

// decidedEnd reports whether a recorded stop reason is one a process
// decided, not a loss it saw.
func decidedEnd(reason string) bool {
	for _, p := range []string{stopIdle, stopExpired, stopStopped} {
		if strings.HasPrefix(reason, p) {
			return true
		}
	}
	return false
}

// errEndDecided is attach's answer for a container whose end another
// process decided while it attached: open removes it and starts afresh.
var errEndDecided = errors.New("the container's end was decided meanwhile")

// maxNameRaces bounds how often open may lose the race for a key's
// container name to another process and look again.
const maxNameRaces = 20

// startGrace is how long a container may stay between create and start
// (another process is starting it) before it is taken for abandoned.
const startGrace = 30 * time.Second

// settle waits while container c is being started or removed by someone
// else, until it runs, is gone, or has stayed created past startGrace
// (its creator died between create and start: it never served anyone, so
// it is removed without a word).
func (m *Manager) settle(ctx context.Context, c Container) error {
	delay := 20 * time.Millisecond
	for {
		if c.Status == "created" && time.Since(c.Created) > startGrace {
			if err := m.drv.Remove(ctx, c.ID); err != nil {
				return err
			}
			return nil
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay = min(delay*2, 250*time.Millisecond)
		next, err := m.drv.Inspect(ctx, c.ID)
		if errors.Is(err, ErrContainerNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if next.Status != "created" && next.Status != "removing" {
			return nil
		}
		c = next
	}
}

// usable reports whether a container can serve a session now.
func (m *Manager) usable(c Container) bool {
	return c.Running && m.knownImage(c.Image)
}

// deathReason says why a container cannot serve its session.
func deathReason(c Container, image string) string {
	switch {
	case c.OOMKilled:
		return "was killed: out of memory"
	case !c.Running && c.ExitCode == 137:
		return "was killed (exit code 137)"
	case !c.Running:
		return fmt.Sprintf("stopped (%s, exit code %d)", c.Status, c.ExitCode)
	case c.Image != image:
		return "runs another sandbox image"
	}
	return "is unusable"
}

// attach connects to the kernel of a running container and records the
// session if no record exists.
func (m *Manager) attach(ctx context.Context, e *entry, c Container) (err error) {
	ctx, span := m.startSpan(ctx, SpanReattach, e.key, AttrContainerID.String(c.ID))
	defer func() { endSpan(span, err) }()
	client, err := m.dial(ctx, c.ID)
	var lost *lostError
	if errors.As(err, &lost) {
		if reason, ended := m.recordedEnd(ctx, e.id, c.ID); ended && decidedEnd(reason) {
			// Removed by whoever decided its end (an expiry, an
			// eviction) as this process opened it: not a loss.
			return errEndDecided
		}
		m.markStopped(ctx, e.id, c.ID, "lost: "+lost.reason)
	}
	if err != nil {
		return err
	}
	e.containerID, e.client = c.ID, client
	m.streamUp(e)
	e.execCount = client.Hello().ExecutionCount
	m.baseline(ctx, e, true)
	now := time.Now()
	row, err := m.store.Session(ctx, m.ns, e.id)
	if err == nil && row.ContainerID == c.ID {
		e.created = row.Created
		m.touch(e, now)
		if row.Stopped.IsZero() {
			return nil
		}
		if decidedEnd(row.StopReason) {
			// Another process (or this one's sweep) decided its end
			// since open looked (see recordedEnd), and is removing it:
			// recording it live again would name a removed container.
			closeClient(e)
			e.containerID = ""
			return errEndDecided
		}
		// Running, so not ended (see recordedEnd): live again.
		e.cr = m.creationOf(c)
		return m.record(ctx, e)
	}
	e.created = c.Created
	m.touch(e, now)
	// What it was made with, as its labels say: the caller's options are
	// for a new session, and this one exists.
	e.cr = m.creationOf(c)
	return m.record(ctx, e)
}

// record writes the session's row and, in BIND mode, its metadata file.
func (m *Manager) record(ctx context.Context, e *entry) error {
	m.mu.Lock()
	last := e.lastUsed
	m.mu.Unlock()
	err := m.store.PutSession(ctx, store.Session{
		Namespace:      m.ns,
		ID:             e.id,
		Key:            e.key,
		ContainerID:    e.containerID,
		Image:          e.cr.imageRef(m.cfg.SandboxImage),
		Storage:        string(m.cfg.SessionStorage),
		Created:        e.created,
		LastUsed:       last,
		ExecutionCount: e.execCount,
		Limits:         m.limitsOf(e.cr),
		Expires:        e.cr.expiry(e.created),
	})
	if err != nil && diskFull(err) {
		return fmt.Errorf("%w on the disk of the database (ARTIFACTS_DB): record session: %w", ErrNoSpace, m.storageTrouble(err, "the server's database"))
	}
	if err != nil {
		return fmt.Errorf("record session: %w", m.storageTrouble(err, "the server's database"))
	}
	if m.cfg.SessionStorage == config.StorageBind {
		m.writeMetadata(e, last)
	}
	return nil
}

// usedRowEvery is how often markUsed writes a session's use to its row at
// most: a row lagging that much behind leaves even a 2 s idle timeout
// room, and a write per file operation would cost more than the operation.
const usedRowEvery = time.Second

// markUsed records that session e is used now, in memory and in the row
// other processes' sweeps read: a command or file operation that only
// this process knew of would leave another process to see the session
// idle, and remove it under the call. It returns store.ErrEnded if the row
// records the end of e's container (another process's sweep decided to
// evict it as this call began): the caller drops e and opens the key anew.
func (m *Manager) markUsed(ctx context.Context, e *entry) error {
	now := time.Now()
	m.mu.Lock()
	e.lastUsed = now
	every := usedRowEvery
	if t := m.cfg.IdleTimeout / 4; t > 0 && t < every {
		every = t // a short idle timeout leaves less room
	}
	write := now.Sub(e.usedRow) >= every
	if write {
		e.usedRow = now
	}
	m.mu.Unlock()
	if !write {
		// Written a fraction of the idle timeout ago: no sweep can have
		// found it idle since.
		return nil
	}
	err := m.store.UseSession(context.WithoutCancel(ctx), m.ns, e.id, e.containerID, now)
	switch {
	case errors.Is(err, store.ErrEnded):
		return err
	case err != nil && !errors.Is(err, store.ErrNotFound):
		m.metrics.dbFailed("use_session")
		m.log.Warn("record session use", "session_id", e.id, "err", err)
	}
	return nil
}

func (m *Manager) touch(e *entry, t time.Time) {
	m.mu.Lock()
	e.lastUsed = t
	m.mu.Unlock()
}

// used is touch for an execution that ended at t, count its execution
// count: it is what Info and List say of the session until the row written
// after the caller has the result says it (see Exec).
func (m *Manager) used(e *entry, t time.Time, count int) {
	m.mu.Lock()
	e.lastUsed = t
	e.execCount = count
	e.lastExec = lastExec{container: e.containerID, at: t, count: count}
	m.mu.Unlock()
}

// fresher is freshUse applied to lastUsed and count, as read from the
// row of session id's container containerID.
func (m *Manager) fresher(id, containerID string, lastUsed *time.Time, count *int) {
	if u, ok := m.freshUse(id, containerID); ok {
		if u.at.After(*lastUsed) {
			*lastUsed = u.at
		}
		*count = max(*count, u.count)
	}
}

// lastExec is the last execution an entry ran: in which container, when it
// ended and its execution count. Guarded by the Manager's mu.
type lastExec struct {
	container string
	at        time.Time
	count     int
}

// freshUse returns what this process knows of the use of session id's
// container that its row may not say yet: the last execution it ran there.
func (m *Manager) freshUse(id, containerID string) (lastExec, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.sessions[id]
	if e == nil || e.lastExec.container == "" || e.lastExec.container != containerID {
		return lastExec{}, false
	}
	return e.lastExec, true
}

// markStopped records that session id's container containerID ended, and
// that whatever ran in it with no result recorded never will have one; best
// effort, since the caller already has a better error to report. A row that
// names another container (another process replaced this one) or already
// records an end is left alone.
func (m *Manager) markStopped(ctx context.Context, id, containerID, reason string) {
	ended, err := m.store.EndSession(context.WithoutCancel(ctx), m.ns, id, containerID, time.Now(), reason)
	if err != nil {
		m.metrics.dbFailed("stop_session")
		m.log.Warn("record session end", "session_id", id, "container_id", shortID(containerID), "err", err)
	}
	if ended {
		// Another process holding the session reads its row again at
		// its next call, and opens it anew (see checkLive).
		if err := m.bumpEpoch(); err != nil {
			m.log.Warn("record session end", "session_id", id, "err", err)
		}
	}
	m.releaseDisk(context.WithoutCancel(ctx), id, m.containerName(id))
}

// dial connects to the kernel of container id, retrying while its init
// starts. A container that is gone or stopped is a *lostError.
func (m *Manager) dial(ctx context.Context, id string) (*kernel.Client, error) {
	delay := 10 * time.Millisecond
	for {
		rw, err := m.drv.Connect(ctx, id)
		if err != nil {
			if lost := m.checkAlive(ctx, id); lost != nil {
				return nil, lost
			}
			return nil, err
		}
		c, err := m.greet(ctx, id, rw)
		if err == nil {
			// After an interrupt the init needs the grace period and a
			// moment to report; past that it is checked on.
			c.InterruptWait = m.cfg.InterruptGrace + interruptMargin
			return c, nil
		}
		if errors.Is(err, kernel.ErrUnresponsive) {
			// The init is stopped, or said nothing for helloLimit: it
			// will not serve this session again.
			if lost := m.checkAlive(ctx, id); lost != nil {
				return nil, lost
			}
			m.retire(id)
			return nil, silentInit(id, err)
		}
		if errors.Is(err, kernel.ErrProtocolMismatch) {
			return nil, fmt.Errorf("%w: %w", ErrImageStale, err)
		}
		if ctx.Err() != nil {
			if s, ok := rw.(interface{ Stderr() string }); ok && s.Stderr() != "" {
				return nil, fmt.Errorf("connect to the kernel: %w (bridge said: %s)", err, s.Stderr())
			}
			return nil, fmt.Errorf("connect to the kernel: %w", err)
		}
		// Did the container die while we waited for its kernel?
		if lost := m.checkAlive(ctx, id); lost != nil {
			return nil, lost
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// lostError says why a session's container cannot serve it any more.
type lostError struct {
	id      string
	reason  string
	expired bool // the time to live ended it: reason is its stop reason ("expired: ...")
}

func (e *lostError) Error() string {
	if e.expired {
		return fmt.Sprintf("%v: %s; container %s removed", ErrExpired, strings.TrimPrefix(e.reason, stopExpired+": "), shortID(e.id))
	}
	return fmt.Sprintf("%v: container %s %s", ErrSessionLost, shortID(e.id), e.reason)
}

// Unwrap is ErrSessionLost, and ErrExpired for an expiry.
func (e *lostError) Unwrap() []error {
	if e.expired {
		return []error{ErrExpired, ErrSessionLost}
	}
	return []error{ErrSessionLost}
}

// inspectTimeout bounds checkAlive's look at a container: one the engine
// cannot describe in that time is treated as alive, and the caller's own
// deadline (a hello, a ping) decides.
const inspectTimeout = 2 * time.Second

// checkAlive returns a *lostError if container id is gone or stopped, nil
// if it runs (or the engine cannot say).
func (m *Manager) checkAlive(ctx context.Context, id string) error {
	// Bounded: under gVisor the engine holds a container whose sandbox is
	// stopped while an exec into it waits, and Inspect waits with it.
	ctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	defer cancel()
	c, err := m.drv.Inspect(ctx, id)
	switch {
	case errors.Is(err, ErrContainerNotFound):
		return &lostError{id: id, reason: "was removed"}
	case err != nil:
		return nil
	case !c.Running:
		return &lostError{id: id, reason: deathReason(c, m.image.ID)}
	}
	return nil
}
