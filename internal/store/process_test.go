package store_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
)

// TestProcesses opens one new file from several processes at once, as a
// backend and a CLI do, each recording executions: the test binary runs
// itself as the children.
func TestProcesses(t *testing.T) {
	const procs, each = 4, 25
	if path := os.Getenv("STORE_TEST_DB"); path != "" {
		s, err := store.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := range each {
			e := &store.Execution{Namespace: "n", SessionID: "s",
				ExecID: os.Getenv("STORE_TEST_CHILD") + "-" + strconv.Itoa(i)}
			if err := s.RecordExecution(t.Context(), e); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agentbox.db")
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestProcesses$", "-test.count=1")
			cmd.Env = append(os.Environ(), "STORE_TEST_DB="+path, fmt.Sprintf("STORE_TEST_CHILD=%d", i))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("child %d: %v\n%s", i, err, out)
			}
		})
	}
	wg.Wait()

	s, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := migrationRows(t, s), allMigrations(t); !slices.Equal(got, want) {
		t.Errorf("schema_migrations = %v, want %v (each once)", got, want)
	}
	list, err := s.Executions(t.Context(), "n", "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != procs*each {
		t.Errorf("got %d executions, want %d", len(list), procs*each)
	}
}
