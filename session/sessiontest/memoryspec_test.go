package sessiontest_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// specDriver is the fake driver that keeps every spec it was asked to
// create, and refuses a negative oom_score_adj when refuseOOMAdj is set (as a
// nested or rootless engine does).
type specDriver struct {
	*sessiontest.Driver
	refuseOOMAdj bool
	// onRefuse, when set, runs as a refused create returns: another
	// process making the same container then, say.
	onRefuse func(spec session.Spec)
	mu       sync.Mutex
	specs    []session.Spec
}

var errOOMAdj = fmt.Errorf("%w: OCI runtime create failed: can't get final child's PID from pipe: EOF", session.ErrContainerStart)

func (d *specDriver) Create(ctx context.Context, spec session.Spec) (string, error) {
	d.mu.Lock()
	d.specs = append(d.specs, spec)
	d.mu.Unlock()
	if d.refuseOOMAdj && spec.OomScoreAdj < 0 {
		if d.onRefuse != nil {
			d.onRefuse(spec)
		}
		return "", errOOMAdj
	}
	return d.Driver.Create(ctx, spec)
}

func (d *specDriver) created() []session.Spec {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.specs)
}

func envOf(s session.Spec, name string) string {
	for _, kv := range s.Env {
		if len(kv) > len(name) && kv[:len(name)+1] == name+"=" {
			return kv[len(name)+1:]
		}
	}
	return ""
}

// TestMemoryLimitCountsFilesApart: the container's memory limit is the
// processes' SANDBOX_MEMORY_MB plus every file system in memory at its full
// size (/session in TMPFS mode, /tmp, /dev/shm), so that files can never take
// the processes' memory, nor the processes the files'; the init is told both
// halves (its watchdog holds the processes to theirs), and asks the OOM
// killer to spare it.
func TestMemoryLimitCountsFilesApart(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name    string
		storage config.Storage
		opts    []session.ExecOption
		procMB  int64
		filesMB int64
	}{
		{"tmpfs", config.StorageTMPFS, nil, 1024, 1024 + 256 + 64},
		{"bind", config.StorageBind, nil, 1024, 256 + 64},
		{"asked for less", config.StorageTMPFS, []session.ExecOption{session.CreateWith(session.MemoryMB(512))}, 512, 1024 + 256 + 64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &specDriver{Driver: sessiontest.NewDriver()}
			m := startManager(t, d.Driver, testConfig(t, func(cfg *config.Config) { cfg.SessionStorage = c.storage }), session.WithDriver(d))
			mustExec(t, m, "k", "x = 1", c.opts...)
			specs := d.created()
			if len(specs) == 0 {
				t.Fatal("no container created")
			}
			s := specs[len(specs)-1]
			if want := (c.procMB + c.filesMB) * mib; s.MemoryBytes != want {
				t.Errorf("container memory limit %d MiB, want %d MiB (processes %d + files %d)", s.MemoryBytes/mib, want/mib, c.procMB, c.filesMB)
			}
			if got := envOf(s, "AGENTBOX_MEMORY_LIMIT"); got != strconv.FormatInt(c.procMB*mib, 10) {
				t.Errorf("AGENTBOX_MEMORY_LIMIT=%s, want the processes' %d MiB", got, c.procMB)
			}
			if got := envOf(s, "AGENTBOX_FILES_MEMORY"); got != strconv.FormatInt(c.filesMB*mib, 10) {
				t.Errorf("AGENTBOX_FILES_MEMORY=%s, want %d MiB", got, c.filesMB)
			}
			if s.ShmBytes != 64*mib {
				t.Errorf("/dev/shm %d bytes, want the 64 MiB counted", s.ShmBytes)
			}
			if s.OomScoreAdj != -1000 {
				t.Errorf("the init's oom_score_adj %d, want -1000", s.OomScoreAdj)
			}
		})
	}
}

// TestOOMScoreAdjRefusedByTheEngine: an engine that cannot lower the init's
// oom_score_adj fails to start the container; the Manager starts it without,
// and asks no more for the rest of its life (one refused attempt in all).
// It records the refusal, so a later Manager on the same database asks
// none for a day (each new Manager paid a failed start, half a second on a
// VM whose engine refuses it: every agentbox command, every test), and asks
// again after that.
func TestOOMScoreAdjRefusedByTheEngine(t *testing.T) {
	cfg := testConfig(t, nil)
	adjs := func(d *specDriver) []int {
		var adj []int
		for _, s := range d.created() {
			adj = append(adj, s.OomScoreAdj)
		}
		return adj
	}
	d := &specDriver{Driver: sessiontest.NewDriver(), refuseOOMAdj: true}
	m := startManager(t, d.Driver, cfg, session.WithDriver(d))
	mustExec(t, m, "a", "x = 1")
	mustExec(t, m, "b", "x = 1")
	if adj := adjs(d); !slices.Equal(adj, []int{-1000, 0, 0}) {
		t.Fatalf("oom_score_adj asked of the engine, in order: %v, want [-1000 0 0]", adj)
	}

	later := &specDriver{Driver: sessiontest.NewDriver(), refuseOOMAdj: true}
	mustExec(t, startManager(t, later.Driver, cfg, session.WithDriver(later)), "c", "x = 1")
	if adj := adjs(later); !slices.Equal(adj, []int{0}) {
		t.Errorf("a later Manager on the same database asked the engine for %v, want [0]", adj)
	}

	st, err := store.Open(context.Background(), cfg.ArtifactsDB)
	if err != nil {
		t.Fatal(err)
	}
	_, at, err := st.Fact(context.Background(), "oom_score_adj_refused")
	if err == nil {
		err = st.SetFact(context.Background(), "oom_score_adj_refused", "refused", at.Add(-25*time.Hour))
	}
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	dayAfter := &specDriver{Driver: sessiontest.NewDriver()}
	mustExec(t, startManager(t, dayAfter.Driver, cfg, session.WithDriver(dayAfter)), "d", "x = 1")
	if adj := adjs(dayAfter); !slices.Equal(adj, []int{-1000}) {
		t.Errorf("a Manager a day after the refusal asked the engine for %v, want [-1000]", adj)
	}
}

// TestOOMScoreAdjFallbackMeetsAnotherProcess: when the engine refuses -1000
// and another process makes the session's container before the retry
// without it, the retry's name conflict is what the caller hears, so it
// waits for that process's container instead of failing with the first
// refusal (TestRacingProcessesShareOneSession failed so on this engine).
func TestOOMScoreAdjFallbackMeetsAnotherProcess(t *testing.T) {
	d := &specDriver{Driver: sessiontest.NewDriver(), refuseOOMAdj: true}
	d.onRefuse = func(spec session.Spec) {
		spec.OomScoreAdj = 0
		if _, err := d.Driver.Create(context.Background(), spec); err != nil {
			t.Errorf("the other process's create: %v", err)
		}
	}
	m := startManager(t, d.Driver, testConfig(t, nil), session.WithDriver(d))
	mustExec(t, m, "a", "x = 1")
}
