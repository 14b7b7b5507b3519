package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// TestHelperRacer is not a test: TestRacingProcessesShareOneSession runs the
// test binary again with it as one of several processes that use a new key
// at the same moment.
func TestHelperRacer(t *testing.T) {
	raw := os.Getenv("AGENTBOX_TEST_RACER")
	if raw == "" {
		t.Skip("helper process for TestRacingProcessesShareOneSession")
	}
	var args struct {
		Config    config.Config
		Namespace string
		Key       string
		At        time.Time
	}
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	m, err := session.NewManager(context.Background(), args.Config, session.WithNamespace(args.Namespace),
		session.WithLabels(map[string]string{dockertest.LabelTest: "TestRacingProcessesShareOneSession"}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	time.Sleep(time.Until(args.At))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := m.Exec(ctx, args.Key, "import os\nn = globals().get('n', 0) + 1\nprint(os.uname().nodename)")
	if err != nil {
		fmt.Println("RESULT error", strings.ReplaceAll(err.Error(), "\n", " "))
		return
	}
	fmt.Println("RESULT ok", strings.TrimSpace(res.Stdout))
}

// TestRacingProcessesShareOneSession: any number of processes executing on
// a new key at the same moment end with one container, and every one of
// them succeeds. Before, the loser of the name race failed with "container
// name in use", and a loser that found the winner's container not yet
// running judged it dead and removed it, failing everyone.
func TestRacingProcessesShareOneSession(t *testing.T) {
	t.Parallel()
	trials := 10
	if testing.Short() {
		trials = 2
	}
	for _, n := range []int{4, 8} {
		t.Run(fmt.Sprintf("%d processes", n), func(t *testing.T) {
			cfg := testConfig(t, nil)
			ns := namespace()
			managerFor(t, cfg, ns) // cleans the namespace up at the end
			for trial := range trials {
				key := fmt.Sprintf("race-%d", trial)
				args, _ := json.Marshal(map[string]any{"Config": cfg, "Namespace": ns, "Key": key, "At": time.Now().Add(3 * time.Second)})
				var wg sync.WaitGroup
				results := make([]string, n)
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRacer$", "-test.v")
						cmd.Env = append(os.Environ(), "AGENTBOX_TEST_RACER="+string(args))
						out, err := cmd.CombinedOutput()
						results[i] = fmt.Sprintf("no result (%v): %s", err, out)
						sc := bufio.NewScanner(strings.NewReader(string(out)))
						for sc.Scan() {
							if r, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
								results[i] = r
							}
						}
					}()
				}
				wg.Wait()
				hosts := map[string]bool{}
				for i, r := range results {
					host, ok := strings.CutPrefix(r, "ok ")
					if !ok {
						t.Errorf("trial %d, process %d: %s", trial, i, r)
						continue
					}
					hosts[host] = true
				}
				if len(hosts) > 1 {
					t.Errorf("trial %d: %d containers served one key: %v", trial, len(hosts), hosts)
				}
				list, err := dockertest.Engine(t).ListContainers(context.Background(), session.LabelNamespace+"="+ns, session.LabelRole+"="+session.RoleSession)
				if err != nil {
					t.Fatal(err)
				}
				if len(list) != trial+1 {
					t.Errorf("trial %d: %d session containers in the namespace, want %d", trial, len(list), trial+1)
				}
				if t.Failed() {
					return
				}
			}
		})
	}
}
