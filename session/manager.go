package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Labels on the containers a Manager makes. Docker cannot change a
// container's labels, and a warm container becomes a session when it is
// handed to a key (renamed), so the name is the authority on what a
// container is: <namespace>_pool_<suffix> is warm, any other
// <namespace>_<session id> is a session, whatever its labels; the history
// database holds every session's key. List, the sweep, agentbox ls and
// session-viewer go by the name.
const (
	LabelNamespace = "io.agentbox.namespace" // the manager namespace: on every container
	LabelStorage   = "io.agentbox.storage"   // TMPFS or BIND: on every container
	// LabelIdleTimeout is the session's own IDLE_TIMEOUT_S, in seconds
	// ("0": never evicted): whichever manager sweeps applies it. On every
	// container.
	LabelIdleTimeout = "io.agentbox.idle-timeout"
	// LabelRole is RoleSession on a container created for its key. Warm
	// containers carry none (a session made from one has none either).
	LabelRole = "io.agentbox.role"
	// LabelKey is the session key (when printable and short) on a
	// container created for its key; a session made from a warm container
	// has none.
	LabelKey = "io.agentbox.session-key"

	RoleSession = "session"
	// RolePool was the role of warm containers, which kept it as sessions.
	//
	// Deprecated: warm containers carry no role; their name says what
	// they are.
	RolePool = "pool"
)

// DefaultNamespace is the namespace of a Manager whose Config names none
// and that has no WithNamespace.
const DefaultNamespace = config.DefaultNamespace

// Manager pins one container per session key and runs code in its kernel. It
// is safe for concurrent use: calls on one key are serialized, calls on
// different keys run in parallel. A Manager started in a new process finds
// the running containers of its namespace and reattaches to them with their
// kernel state intact.
type Manager struct {
	cfg         config.Config
	drv         Driver
	closer      io.Closer // the default driver's client
	store       *store.Store
	art         artifactStore
	fetcher     datasets.Fetcher
	dsCache     *datasets.Cache
	dsStatus    *datasets.Statuses
	log         *slog.Logger
	ns          string
	image       Image
	hostMB      int // memory of the engine's host, in MiB; 0: unknown
	lookup      func(string) (string, bool)
	grace       time.Duration // before unusable containers are removed
	interval    time.Duration // of the background sweep
	extraLabels map[string]string
	images      map[string]imageChoice // allowed sandbox images by name, resolved by NewManager
	defaults    *creation              // what a session asking for nothing is made with
	pool        *pool
	owner       *owner     // this process, as the owner of its executions
	cmds        commandSet // background shell commands (StartCommand)
	quota       *quota     // tenant quotas (WithQuotaGroup); nil: none
	// noIntents skips the intent write. Only the benchmark that prices
	// that write sets it, to measure the Manager without it in the same
	// run; nothing else may.
	noIntents bool
	// oomAdjRefused is set once the engine refused the init's negative
	// oom_score_adj, or another Manager recorded that it does (see
	// createContainer); oomAdjRead reads that record once.
	oomAdjRefused atomic.Bool
	oomAdjRead    sync.Once

	// Telemetry (trace.go, metrics.go).
	tp           trace.TracerProvider // nil: the global one at call time
	traceContent bool
	metricsReg   prometheus.Registerer
	metrics      *metrics // nil: none
	registered   []prometheus.Collector

	bg     context.Context // lives until Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // background goroutines
	calls  sync.WaitGroup // public calls in flight

	mu        sync.Mutex
	closed    bool
	chans     channels          // per container: the connection files and commands use (channel.go)
	channelOn bool              // WithChannel
	chunks    chunkPool         // writes' frame buffers
	sessions  map[string]*entry // by session id

	diskMu sync.Mutex // one reserve check and image allocation at a time (disk.go)
	// blobMu guards blobPending: the bytes ingestions have taken of the
	// blobstore's room above DISK_RESERVE_MB and not yet written in full
	// (takeBlobRoom), so that ingestions running at once share the room.
	blobMu      sync.Mutex
	blobPending int64
}

// Option configures a Manager.
type Option func(*Manager) error

// WithDriver makes the Manager use d instead of the Docker engine.
func WithDriver(d Driver) Option {
	return func(m *Manager) error { m.drv = d; return nil }
}

// WithLogger sets the logger of background work (sweeps, pool, best-effort
// cleanup). The default discards.
func WithLogger(l *slog.Logger) Option {
	return func(m *Manager) error { m.log = l; return nil }
}

var nsPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// WithNamespace separates this Manager's containers from those of managers
// with another namespace on the same engine: lowercase letters, digits and
// dashes, at most 32. It wins over the Config's Namespace
// (AGENTBOX_NAMESPACE, default "agentbox").
func WithNamespace(ns string) Option {
	return func(m *Manager) error {
		if !nsPattern.MatchString(ns) {
			return fmt.Errorf("namespace %q: want lowercase letters, digits and dashes, at most 32", ns)
		}
		m.ns = ns
		return nil
	}
}

// WithLabels adds labels to every container the Manager creates (for
// example an owner or a cost centre); they cannot replace agentbox's own.
func WithLabels(labels map[string]string) Option {
	return func(m *Manager) error {
		for k, v := range labels {
			if strings.HasPrefix(k, "io.agentbox.") && !strings.HasPrefix(k, "io.agentbox.test") {
				return fmt.Errorf("label %s: the io.agentbox. prefix is reserved", k)
			}
			m.extraLabels[k] = v
		}
		return nil
	}
}

// WithLookupEnv sets where the values of SANDBOX_ENV_PASSTHROUGH variables
// come from (default os.LookupEnv).
func WithLookupEnv(lookup func(string) (string, bool)) Option {
	return func(m *Manager) error { m.lookup = lookup; return nil }
}

// WithOrphanGrace sets how old a labelled container that no manager can use
// (stopped, dead, or from another image) must be before it is removed
// (default one minute), so that a container another process is creating
// right now is left alone.
func WithOrphanGrace(d time.Duration) Option {
	return func(m *Manager) error { m.grace = d; return nil }
}

// WithChannel(false) runs each files API call and shell command by an
// engine exec, as an image that predates the channel is served. By
// default they run as tools the init forks, over one kept connection per
// container (session/channel.go): a fork and a round trip, no exec.
func WithChannel(on bool) Option {
	return func(m *Manager) error {
		m.channelOn = on
		return nil
	}
}

// WithSweepInterval sets how often idle sessions and orphans are looked for
// (default a tenth of IDLE_TIMEOUT_S, between one second and one minute).
func WithSweepInterval(d time.Duration) Option {
	return func(m *Manager) error {
		if d <= 0 {
			return fmt.Errorf("sweep interval %s: want more than 0", d)
		}
		m.interval = d
		return nil
	}
}

// NewManager checks the configuration and the sandbox image, opens the
// history database and starts the background sweep and warm pool. The
// containers of earlier managers in the same namespace (cfg.Namespace,
// unless WithNamespace names another) are reattached on first use. Close
// releases it; containers keep running for the next manager until they are
// idle.
func NewManager(ctx context.Context, cfg config.Config, opts ...Option) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:         cfg,
		log:         slog.New(slog.DiscardHandler),
		ns:          cmp.Or(cfg.Namespace, DefaultNamespace),
		lookup:      os.LookupEnv,
		grace:       time.Minute,
		channelOn:   true,
		sessions:    make(map[string]*entry),
		extraLabels: map[string]string{},
	}
	for _, o := range opts {
		if err := o(m); err != nil {
			return nil, err
		}
	}
	if m.interval == 0 {
		m.interval = min(max(cfg.IdleTimeout/10, time.Second), time.Minute)
	}
	for _, note := range cfg.Notes {
		// LangGraph-Sandbox settings read otherwise or not needed: said
		// once, so that its .env files run without a surprise.
		m.log.Warn("LangGraph-Sandbox setting", "note", note)
	}
	if m.metricsReg != nil {
		if err := m.registerMetrics(m.metricsReg); err != nil {
			return nil, err
		}
	}
	if m.drv == nil {
		d, closer, err := NewDockerDriver()
		if err != nil {
			m.unregisterMetrics()
			return nil, err
		}
		m.drv, m.closer = d, closer
	}
	fail := func(err error) (*Manager, error) {
		m.unregisterMetrics()
		if m.closer != nil {
			m.closer.Close()
		}
		if m.store != nil {
			m.store.Close()
		}
		m.owner.close()
		return nil, err
	}
	img, err := m.drv.Image(ctx, cfg.SandboxImage)
	if err != nil {
		return fail(err)
	}
	if err := checkImage(cfg.SandboxImage, img); err != nil {
		return fail(err)
	}
	m.image = img
	m.learnHostMemory(ctx)
	m.resolveImages(ctx)
	if m.store, err = store.Open(ctx, cfg.ArtifactsDB); err != nil {
		return fail(fmt.Errorf("open history: %w", err))
	}
	if m.owner, err = openOwner(cfg.ArtifactsDB); err != nil {
		return fail(err)
	}
	if err := m.openArtifacts(); err != nil {
		return fail(fmt.Errorf("open artifacts: %w", err))
	}
	m.openDatasets()
	m.bg, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m.pool = newPool(m, cfg.PoolSize)
	m.wg.Add(1)
	go m.sweepLoop()
	if cfg.PoolSize > 0 {
		m.wg.Add(1)
		go m.pool.fillLoop()
	}
	return m, nil
}

// checkImage refuses an image that speaks another protocol or was built from
// other sources than this program embeds.
func checkImage(ref string, img Image) error {
	_, hasProto := img.Labels[sandboximage.LabelProtocol]
	_, hasHash := img.Labels[sandboximage.LabelSourceHash]
	if !hasProto && !hasHash {
		// Not an old image of ours but none at all: "stale, speaks
		// protocol \"\"" would send the operator looking for a version.
		return fmt.Errorf("%w: %s (no label %s): build one with sandbox-setup or derive from %s",
			ErrNotSandboxImage, ref, sandboximage.LabelProtocol, config.Default().SandboxImage)
	}
	if p := img.Labels[sandboximage.LabelProtocol]; p != strconv.Itoa(kernel.ProtocolVersion) {
		return fmt.Errorf("%w: %s speaks kernel protocol %q, this program %d: rebuild it with sandbox-setup", ErrImageStale, ref, p, kernel.ProtocolVersion)
	}
	if h := img.Labels[sandboximage.LabelSourceHash]; h != sandboximage.SourceHash() {
		return fmt.Errorf("%w: %s was built from other kernel sources: rebuild it with sandbox-setup", ErrImageStale, ref)
	}
	return nil
}

// Namespace returns the namespace of the Manager's containers.
func (m *Manager) Namespace() string { return m.ns }

// begin registers a public call, failing once the Manager is closed.
func (m *Manager) begin() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.calls.Add(1)
	return nil
}

// Close stops the background work, waits for calls in flight (until ctx
// ends), closes the kernel connections and removes the warm pool's
// containers. Session containers keep running: a new Manager reattaches to
// them. After Close every call fails with ErrClosed.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()

	done := make(chan struct{})
	go func() { m.calls.Wait(); close(done) }()
	var errs []error
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("close: calls still running: %w", ctx.Err()))
	}
	m.cancel()
	m.wg.Wait()
	m.mu.Lock()
	entries := make([]*entry, 0, len(m.sessions))
	for _, e := range m.sessions {
		entries = append(entries, e)
	}
	m.mu.Unlock()
	for _, e := range entries {
		m.closeIdle(e)
	}
	m.chans.closeAll()
	errs = append(errs, m.pool.drain(context.WithoutCancel(ctx)))
	if err := m.art.blobs.Flush(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close: %w", err))
	}
	errs = append(errs, m.dsCache.Close())
	errs = append(errs, m.store.Close())
	errs = append(errs, m.owner.close())
	if m.closer != nil {
		errs = append(errs, m.closer.Close())
	}
	return errors.Join(errs...)
}

// containerName is the engine name of the session id's container: names are
// unique in an engine, so two processes creating the same key make one.
func (m *Manager) containerName(id string) string { return m.ns + "_" + id }

// labels returns the labels of a new container; role "" for a warm one,
// which may become any key's session.
func (m *Manager) labels(role string) map[string]string {
	l := map[string]string{
		LabelNamespace: m.ns,
		LabelStorage:   string(m.cfg.SessionStorage),
		// Seconds, rounded up: a timeout under a second is not "never".
		LabelIdleTimeout:       strconv.FormatInt(int64((m.cfg.IdleTimeout+time.Second-1)/time.Second), 10),
		LabelIdleAction:        string(m.defaultIdleAction()),
		LabelIdlePausedTimeout: strconv.FormatInt(int64((m.cfg.IdlePausedTimeout+time.Second-1)/time.Second), 10),
	}
	if role != "" {
		l[LabelRole] = role
	}
	for k, v := range m.extraLabels {
		l[k] = v
	}
	return l
}
