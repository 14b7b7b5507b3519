package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Tenant quotas. A group of session keys (a tenant of agentbox serve: an
// API key) shares the limits the Config sets (TENANT_MAX_SANDBOXES,
// TENANT_MAX_MEMORY_MB, TENANT_MAX_INFLIGHT, TENANT_MAX_ARTIFACT_MB) once
// WithQuotaGroup says which keys form a group. Every path that creates a
// session passes one check (open, before create), so no API can go around
// it; the check and the reservation of the new session happen under one
// lock, so two creations at the limit cannot both win in this process.
// Sessions are counted from the database (what every process sharing it
// sees), plus the creations of this process not yet recorded; executions
// in flight are this process's own.

// ErrQuota means a tenant reached one of its quotas (see QuotaError).
var ErrQuota = errors.New("tenant quota reached")

// QuotaError is a call refused because the tenant of its key is at a
// limit. Its message names the limit and the setting that governs it.
type QuotaError struct {
	Group   string // the key prefix that makes the tenant
	Limit   string // "sandboxes", "memory", "inflight" or "artifacts"
	Setting string // TENANT_MAX_SANDBOXES, TENANT_MAX_MEMORY_MB, TENANT_MAX_INFLIGHT or TENANT_MAX_ARTIFACT_MB
	Max     int64  // the limit: sandboxes, MiB, calls, or MiB
	Used    int64  // what the tenant holds, in Max's unit
	Asked   int64  // what the call would add (memory: the new session's MiB)
}

func (e *QuotaError) Error() string {
	var what string
	switch e.Limit {
	case "sandboxes":
		what = fmt.Sprintf("at most %d %s per tenant (%s), and %d exist: delete one first", e.Max, plural(e.Max, "sandbox", "sandboxes"), e.Setting, e.Used)
	case "memory":
		what = fmt.Sprintf("at most %d MiB of sandbox memory per tenant (%s): %d MiB in use, and this sandbox asks for %d MiB", e.Max, e.Setting, e.Used, e.Asked)
	case "inflight":
		what = fmt.Sprintf("at most %d executions and commands running or queued at once per tenant (%s): wait for one to finish", e.Max, e.Setting)
	case "artifacts":
		what = fmt.Sprintf("at most %d MiB of stored artifacts per tenant (%s), and %d MiB are stored", e.Max, e.Setting, e.Used)
	default:
		what = fmt.Sprintf("%s: at most %d (%s)", e.Limit, e.Max, e.Setting)
	}
	return ErrQuota.Error() + ": " + what
}

func (e *QuotaError) Unwrap() error { return ErrQuota }

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// WithQuotaGroup applies the Config's tenant quotas (TENANT_MAX_*) to the
// keys group names a tenant: it returns the prefix every key of that
// tenant starts with (for agentbox serve, the tenant id and "/"), or false
// for a key of no tenant, which no quota limits. Without it there is no
// quota.
func WithQuotaGroup(group func(key string) (prefix string, ok bool)) Option {
	return func(m *Manager) error {
		if group == nil {
			return errors.New("quota group: nil function")
		}
		m.quota = &quota{group: group, creating: map[string]map[string]int{}, inflight: map[string]int{}, art: map[string]artUse{}}
		return nil
	}
}

// artCacheFor is how long a tenant's summed artifact bytes are reused
// before the index is asked again. The sum scans the namespace's rows (33
// ms over 20 000 rows, BenchmarkBytesByKeyPrefix): too much for every
// execution. Meanwhile what this process's executions store is added as
// they store it, so the sum only lags behind deletions (retention) and
// other processes.
const artCacheFor = time.Minute

type quota struct {
	group func(string) (string, bool)

	// admitting is held across a creation's count and reservation (a
	// database read), and by the release of a reservation: a creation
	// that records its row and gives up its reservation between another's
	// read and check would be seen by neither. mu guards the maps only,
	// so calls in flight never wait on the database.
	admitting sync.Mutex
	mu        sync.Mutex
	creating  map[string]map[string]int // by prefix: ids of sessions being created, with their MiB
	inflight  map[string]int            // by prefix: calls admitted and not finished
	art       map[string]artUse         // by prefix
}

type artUse struct {
	bytes int64
	at    time.Time
}

// admitSession checks that e's tenant may have one more session, of e's
// memory, and reserves its place until the returned release (called once
// the session is recorded, or failed).
func (m *Manager) admitSession(ctx context.Context, e *entry) (func(), error) {
	q := m.quota
	maxN, maxMem := m.cfg.TenantMaxSandboxes, m.cfg.TenantMaxMemoryMB
	if q == nil || maxN == 0 && maxMem == 0 {
		return func() {}, nil
	}
	prefix, ok := q.group(e.key)
	if !ok {
		return func() {}, nil
	}
	mem := m.cfg.MemoryMB
	if e.cr != nil {
		mem = e.cr.memoryMB
	}
	q.admitting.Lock()
	defer q.admitting.Unlock()
	rows, err := m.store.LiveSessions(ctx, m.ns, prefix)
	if err != nil {
		return nil, fmt.Errorf("count the tenant's sessions: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	held := map[string]int{}
	for _, r := range rows {
		n, err := strconv.Atoi(r.Limits["memory_mb"])
		if err != nil || n <= 0 {
			n = m.cfg.MemoryMB
		}
		held[r.ID] = n
	}
	for id, n := range q.creating[prefix] {
		held[id] = n
	}
	delete(held, e.id)
	usedMem := 0
	for _, n := range held {
		usedMem += n
	}
	switch {
	case maxN > 0 && len(held) >= maxN:
		return nil, &QuotaError{Group: prefix, Limit: "sandboxes", Setting: "TENANT_MAX_SANDBOXES", Max: int64(maxN), Used: int64(len(held)), Asked: 1}
	case maxMem > 0 && usedMem+mem > maxMem:
		return nil, &QuotaError{Group: prefix, Limit: "memory", Setting: "TENANT_MAX_MEMORY_MB", Max: int64(maxMem), Used: int64(usedMem), Asked: int64(mem)}
	}
	if q.creating[prefix] == nil {
		q.creating[prefix] = map[string]int{}
	}
	q.creating[prefix][e.id] = mem
	return func() {
		q.admitting.Lock()
		defer q.admitting.Unlock()
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.creating[prefix], e.id)
		if len(q.creating[prefix]) == 0 {
			delete(q.creating, prefix)
		}
	}, nil
}

// Admission is a place among the executions and commands of a tenant in
// flight (TENANT_MAX_INFLIGHT), taken with Admit before the call starts.
type Admission struct {
	key string

	mu      sync.Mutex
	release func() // nil once released or handed to a call
}

// Admit takes a place for one execution or command of key's tenant, for
// a caller that must know before it starts answering (a server that
// streams refuses with a status, not in the stream): it fails with a
// *QuotaError when the tenant is at TENANT_MAX_INFLIGHT, or its stored
// artifacts at TENANT_MAX_ARTIFACT_MB. Pass it to Exec (Admitted) or Run
// and StartCommand (Command.Admission), which then own it: they give the
// place back when done (a background command when it ends), and the
// caller's Release does nothing. Release it yourself when no call took
// it. A key of no tenant, or a Manager without WithQuotaGroup, is always
// admitted.
func (m *Manager) Admit(ctx context.Context, key string) (*Admission, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	release, err := m.admitCall(ctx, key)
	if err != nil {
		return nil, &Error{Op: "admit", Key: key, Err: err}
	}
	return &Admission{key: key, release: release}, nil
}

// Release gives the place back, unless a call took it; a second call does
// nothing.
func (a *Admission) Release() {
	if rel := a.take(); rel != nil {
		rel()
	}
}

// take hands the release to whoever gives the place back.
func (a *Admission) take() func() {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	rel := a.release
	a.release = nil
	return rel
}

// Admitted gives Exec the place the caller took with Admit for it.
func Admitted(a *Admission) ExecOption {
	return ExecOption{func(o *execOptions) { o.admit = a }}
}

// admitted is the release of a call's place: the one the caller took with
// Admit for the same key, or one taken now.
func (m *Manager) admitted(ctx context.Context, key string, a *Admission) (func(), error) {
	if a != nil && a.key == key {
		if rel := a.take(); rel != nil {
			return rel, nil
		}
		// Released, or used by another call already: a place of its own.
	}
	return m.admitCall(ctx, key)
}

// admitCall counts an execution or command of key's tenant in flight
// until the returned release, and refuses a tenant whose stored artifacts
// reached their limit.
func (m *Manager) admitCall(ctx context.Context, key string) (func(), error) {
	q := m.quota
	if q == nil {
		return func() {}, nil
	}
	prefix, ok := q.group(key)
	if !ok {
		return func() {}, nil
	}
	if max := int64(m.cfg.TenantMaxArtifactMB); max > 0 {
		used, err := m.tenantArtifactBytes(ctx, prefix)
		if err != nil {
			return nil, err
		}
		if used >= max<<20 {
			return nil, &QuotaError{Group: prefix, Limit: "artifacts", Setting: "TENANT_MAX_ARTIFACT_MB", Max: max, Used: used >> 20}
		}
	}
	max := m.cfg.TenantMaxInflight
	if max == 0 {
		return func() {}, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inflight[prefix] >= max {
		return nil, &QuotaError{Group: prefix, Limit: "inflight", Setting: "TENANT_MAX_INFLIGHT", Max: int64(max), Used: int64(q.inflight[prefix])}
	}
	q.inflight[prefix]++
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			if q.inflight[prefix]--; q.inflight[prefix] <= 0 {
				delete(q.inflight, prefix)
			}
		})
	}, nil
}

// tenantArtifactBytes is ArtifactBytes of prefix, reused for artCacheFor.
func (m *Manager) tenantArtifactBytes(ctx context.Context, prefix string) (int64, error) {
	q := m.quota
	q.mu.Lock()
	u, ok := q.art[prefix]
	q.mu.Unlock()
	if ok && time.Since(u.at) < artCacheFor {
		return u.bytes, nil
	}
	n, err := m.ArtifactBytes(ctx, prefix)
	if err != nil {
		return 0, err
	}
	q.mu.Lock()
	q.art[prefix] = artUse{bytes: n, at: time.Now()}
	q.mu.Unlock()
	return n, nil
}

// artifactsStored adds what an execution stored to the summed artifact
// bytes of key's tenant, so that its next call counts them. A file stored
// again unchanged counts again until the next sum: the quota errs on the
// side of the host.
func (m *Manager) artifactsStored(key string, arts []Artifact) {
	q := m.quota
	if q == nil || len(arts) == 0 {
		return
	}
	prefix, ok := q.group(key)
	if !ok {
		return
	}
	var n int64
	for _, a := range arts {
		n += a.Size
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if u, ok := q.art[prefix]; ok {
		u.bytes += n
		q.art[prefix] = u
	}
}

// ArtifactBytes returns the bytes of the stored artifacts of the sessions
// whose keys start with prefix (a tenant's), in this Manager's namespace.
func (m *Manager) ArtifactBytes(ctx context.Context, prefix string) (int64, error) {
	if err := m.begin(); err != nil {
		return 0, err
	}
	defer m.calls.Done()
	return m.art.index.BytesByKeyPrefix(ctx, m.ns, prefix)
}
