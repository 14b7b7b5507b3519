package artifacts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/internal/store"
)

// TestIndexProcesses has a second process (the test binary run again) add
// rows while this one reads the index and adds rows of its own, as a backend
// and a CLI sharing ARTIFACTS_DB do.
func TestIndexProcesses(t *testing.T) {
	const each = 100
	if path := os.Getenv("ARTIFACTS_TEST_DB"); path != "" {
		s, err := store.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ix := artifacts.NewIndex(s)
		for i := range each {
			name := "child-" + strconv.Itoa(i)
			if _, err := ix.Add(t.Context(), artifacts.Artifact{Namespace: "ns", SessionID: "child",
				Name: name, SHA256: sum([]byte(name))}); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if testing.Short() {
		t.Skip("starts a process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agentbox.db")
	s, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ix := artifacts.NewIndex(s)

	cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestIndexProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ARTIFACTS_TEST_DB="+path)
	out := make(chan error, 1)
	var output []byte
	go func() {
		var err error
		output, err = cmd.CombinedOutput()
		out <- err
	}()

	// Read while the child writes: counts only grow, reads never fail.
	seen, reads, i := 0, 0, 0
	for running := true; running; {
		select {
		case err := <-out:
			if err != nil {
				t.Fatalf("child: %v\n%s", err, output)
			}
			running = false
		default:
		}
		if i < each {
			name := "parent-" + strconv.Itoa(i)
			if _, err := ix.Add(t.Context(), artifacts.Artifact{Namespace: "ns", SessionID: "parent",
				Name: name, SHA256: sum([]byte(name))}); err != nil {
				t.Fatal(err)
			}
			i++
		}
		latest, err := ix.Latest(t.Context(), "ns", "child")
		if err != nil {
			t.Fatal(err)
		}
		if len(latest) < seen {
			t.Fatalf("child rows went from %d to %d", seen, len(latest))
		}
		seen = len(latest)
		reads++
	}
	t.Logf("%d reads while the child wrote", reads)

	for _, sess := range []string{"child", "parent"} {
		list, err := ix.BySession(t.Context(), "ns", sess)
		if err != nil || (sess == "child" && len(list) != each) {
			t.Errorf("session %s: %d rows, %v; want %d", sess, len(list), err, each)
		}
	}
}
