package sessiontest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// startFailDriver fails the starts it is told to, as an engine's runtime
// would, and keeps the oom_score_adj of every container asked for.
type startFailDriver struct {
	*sessiontest.Driver
	fail func(n int, spec session.Spec) bool // n counts every Create

	mu   sync.Mutex
	adjs []int
}

func (d *startFailDriver) Create(ctx context.Context, spec session.Spec) (string, error) {
	d.mu.Lock()
	n := len(d.adjs)
	d.adjs = append(d.adjs, spec.OomScoreAdj)
	d.mu.Unlock()
	if d.fail(n, spec) {
		return "", fmt.Errorf("start container: %w: OCI runtime create failed", session.ErrContainerStart)
	}
	return d.Driver.Create(ctx, spec)
}

func (d *startFailDriver) created() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.adjs...)
}

// TestStartFailureIsNotARefusal: a container whose start fails once is
// started again as asked, its init at oom_score_adj -1000. Before, one
// failed start made every sandbox of the Manager start without it, taken
// for an engine that cannot grant it. An engine that refuses it every time
// still gets sandboxes, without it.
func TestStartFailureIsNotARefusal(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(n int, spec session.Spec) bool
		want []int // oom_score_adj of each Create, for two keys
	}{
		{"once", func(n int, _ session.Spec) bool { return n == 0 }, []int{-1000, -1000, -1000}},
		{"refused", func(_ int, s session.Spec) bool { return s.OomScoreAdj < 0 }, []int{-1000, -1000, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &startFailDriver{Driver: sessiontest.NewDriver(), fail: tc.fail}
			m, err := session.NewManager(context.Background(), testConfig(t, nil), session.WithDriver(d))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close(context.Background()) })
			mustExec(t, m, "a", "1")
			mustExec(t, m, "b", "1")
			if got := d.created(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("oom_score_adj of each container asked for: %v, want %v", got, tc.want)
			}
		})
	}
}
