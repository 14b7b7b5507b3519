package session

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics. WithMetrics registers the Manager's metrics (Prometheus client,
// names agentbox_*) on a registry of the embedder's; with none the Manager
// keeps no metrics. Labels never carry a session key or id, so their number
// stays small whatever the traffic. Embedders that want them as
// OpenTelemetry metrics bridge the registry with
// go.opentelemetry.io/contrib/bridges/prometheus.

// WithMetrics registers the Manager's metrics on reg. A registry holds the
// metrics of one Manager: a second Manager on the same one fails NewManager
// with prometheus.AlreadyRegisteredError.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(m *Manager) error { m.metricsReg = reg; return nil }
}

// metrics are the Manager's instruments; a nil *metrics records nothing.
type metrics struct {
	executions     *prometheus.CounterVec   // outcome
	execDuration   *prometheus.HistogramVec // outcome
	commands       *prometheus.CounterVec   // kind, outcome
	cmdDuration    *prometheus.HistogramVec // kind
	coldStart      *prometheus.HistogramVec // kind: session or pool
	poolAcquire    prometheus.Histogram
	poolTakes      *prometheus.CounterVec // result: hit or miss
	artifacts      prometheus.Counter
	artifactBytes  prometheus.Counter
	dedupHits      prometheus.Counter
	datasetFetches *prometheus.CounterVec // outcome: loaded, cached, failed
	kernelRestarts *prometheus.CounterVec // cause
	dbRetries      prometheus.Counter
	dbFailures     *prometheus.CounterVec // op
	// idle counts what IDLE_ACTION=pause did: paused, resumed (by a
	// call), removed_paused (after IDLE_PAUSED_TIMEOUT_S).
	idle *prometheus.CounterVec
}

// durations from a millisecond (a warm exec) to ten minutes.
var durationBuckets = prometheus.ExponentialBucketsRange(0.001, 600, 16)

// registerMetrics makes the Manager's instruments on reg.
func (m *Manager) registerMetrics(reg prometheus.Registerer) error {
	x := &metrics{
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_executions_total",
			Help: "Executions by outcome (ok, raised, timed_out, interrupted, state_lost, kernel_restarted, error); replays are not counted."}, []string{"outcome"}),
		execDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentbox_execution_duration_seconds",
			Help: "How long code ran in the kernel, by outcome.", Buckets: durationBuckets}, []string{"outcome"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_commands_total",
			Help: "Shell commands by kind (run, background) and outcome (ok, failed, timed_out, interrupted, error)."}, []string{"kind", "outcome"}),
		cmdDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentbox_command_duration_seconds",
			Help: "How long shell commands ran, by kind (run, background).", Buckets: durationBuckets}, []string{"kind"}),
		coldStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentbox_cold_start_seconds",
			Help: "Container create to kernel ready, for a session's own container (kind session) or a warm one (kind pool).", Buckets: durationBuckets}, []string{"kind"}),
		poolAcquire: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentbox_pool_acquire_seconds",
			Help: "Handing a warm container to a new session.", Buckets: durationBuckets}),
		poolTakes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_pool_acquisitions_total",
			Help: "New sessions served by a warm container (hit) or by a container of their own (miss)."}, []string{"result"}),
		artifacts: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentbox_artifacts_ingested_total",
			Help: "Artifact files stored after executions."}),
		artifactBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentbox_artifacts_ingested_bytes_total",
			Help: "Bytes of artifact files stored after executions."}),
		dedupHits: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentbox_artifacts_dedup_hits_total",
			Help: "Artifact files whose content the blobstore held already."}),
		datasetFetches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_dataset_fetches_total",
			Help: "Dataset selections by outcome: fetched from the source (loaded), from the host cache (cached), already in the session (present), or failed."}, []string{"outcome"}),
		kernelRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_kernel_restarts_total",
			Help: "Kernel restarts results reported, by cause (interrupt_ignored, out_of_memory, crash)."}, []string{"cause"}),
		dbRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentbox_db_retries_total",
			Help: "History records written on a later call after their first write failed."}),
		dbFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_db_failures_total",
			Help: "Writes to the history database that failed, by operation."}, []string{"op"}),
		idle: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_idle_pause_total",
			Help: "Sessions the idle sweep paused (IDLE_ACTION=pause), that a call resumed, and that were removed after IDLE_PAUSED_TIMEOUT_S paused."}, []string{"action"}),
	}
	cs := []prometheus.Collector{
		x.executions, x.execDuration, x.commands, x.cmdDuration, x.coldStart, x.poolAcquire, x.poolTakes,
		x.artifacts, x.artifactBytes, x.dedupHits, x.datasetFetches, x.kernelRestarts, x.dbRetries, x.dbFailures, x.idle,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentbox_pool_ready",
			Help: "Warm containers waiting for new sessions."}, func() float64 { return float64(m.PoolReady()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentbox_pool_size",
			Help: "Warm containers the pool keeps (POOL_SIZE)."}, func() float64 { return float64(m.cfg.PoolSize) }),
		sessionsCollector{m},
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			m.unregisterMetrics()
			return fmt.Errorf("register metrics: %w", err)
		}
		m.registered = append(m.registered, c)
	}
	m.metrics = x
	return nil
}

// unregisterMetrics takes back what registerMetrics registered, when
// NewManager fails.
func (m *Manager) unregisterMetrics() {
	for _, c := range m.registered {
		m.metricsReg.Unregister(c)
	}
	m.registered = nil
}

// sessionsCollector counts the namespace's sessions by container state
// when scraped (one List: an engine call and a database read).
type sessionsCollector struct{ m *Manager }

var sessionsDesc = prometheus.NewDesc("agentbox_sessions", "Sessions of the namespace by container state (running, paused, paused_idle: paused by the idle sweep, expired, exited, ...), whichever process started them.", []string{"state"}, nil)

// listTimeout bounds the List of a scrape.
const listTimeout = 5 * time.Second

func (c sessionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (c sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	infos, err := c.m.List(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
		return
	}
	by := map[string]int{"running": 0, "paused": 0, "paused_idle": 0}
	for _, in := range infos {
		state := in.State
		if state == StatePaused && in.PausedBy == PausedByIdle {
			state = "paused_idle"
		}
		by[state]++
	}
	for state, n := range by {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), state)
	}
}

// idleDone counts one step of an idle pause.
func (x *metrics) idleDone(action string) {
	if x == nil {
		return
	}
	x.idle.WithLabelValues(action).Inc()
}

func (x *metrics) execDone(res *Result, err error) {
	if x == nil || (res != nil && res.Replayed) {
		return
	}
	outcome := execOutcome(res, err)
	x.executions.WithLabelValues(outcome).Inc()
	if res == nil {
		return
	}
	x.execDuration.WithLabelValues(outcome).Observe(res.Duration.Seconds())
	if res.KernelRestarted {
		x.kernelRestarts.WithLabelValues(restartCause(res)).Inc()
	}
}

// restartCause names why a kernel restarted, from the init's error name.
func restartCause(res *Result) string {
	name := ""
	if res.Error != nil {
		name = res.Error.Name
	}
	switch {
	case name == "KernelKilled":
		return "interrupt_ignored"
	case name == "OutOfMemory" || strings.Contains(res.RestartReason, "memory"):
		return "out_of_memory"
	}
	return "crash"
}

func (x *metrics) commandDone(kind string, res *CommandResult, err error) {
	if x == nil {
		return
	}
	x.commands.WithLabelValues(kind, commandOutcome(res, err)).Inc()
	if res != nil {
		x.cmdDuration.WithLabelValues(kind).Observe(res.Duration.Seconds())
	}
}

func (x *metrics) coldStarted(kind string, d time.Duration) {
	if x != nil {
		x.coldStart.WithLabelValues(kind).Observe(d.Seconds())
	}
}

func (x *metrics) poolTaken(hit bool, d time.Duration) {
	if x == nil {
		return
	}
	if hit {
		x.poolTakes.WithLabelValues("hit").Inc()
		x.poolAcquire.Observe(d.Seconds())
	} else {
		x.poolTakes.WithLabelValues("miss").Inc()
	}
}

func (x *metrics) ingested(arts []Artifact, dedup int) {
	if x == nil {
		return
	}
	var n int64
	for _, a := range arts {
		n += a.Size
	}
	x.artifacts.Add(float64(len(arts)))
	x.artifactBytes.Add(float64(n))
	x.dedupHits.Add(float64(dedup))
}

func (x *metrics) datasetFetched(outcome string) {
	if x != nil {
		x.datasetFetches.WithLabelValues(outcome).Inc()
	}
}

func (x *metrics) dbFailed(op string) {
	if x != nil {
		x.dbFailures.WithLabelValues(op).Inc()
	}
}

func (x *metrics) dbRetried() {
	if x != nil {
		x.dbRetries.Inc()
	}
}
