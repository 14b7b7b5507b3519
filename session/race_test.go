package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	// Ready; the parent says go to every racer at once.
	fmt.Println("READY")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("wait for go: %v", err)
	}
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
	raceProcesses(t, 4)
}

// TestRacingEightProcessesShareOneSession is the same with eight: a test of
// its own, so that both run beside each other and early (parallel subtests
// queue behind every test not yet started, and would run last).
func TestRacingEightProcessesShareOneSession(t *testing.T) {
	t.Parallel()
	raceProcesses(t, 8)
}

// raceProcesses races n processes on a new key, over several trials.
func raceProcesses(t *testing.T, n int) {
	trials := 10
	if testing.Short() {
		trials = 2
	}
	cfg := testConfig(t, nil)
	ns := namespace()
	managerFor(t, cfg, ns) // cleans the namespace up at the end
	for trial := range trials {
		key := fmt.Sprintf("race-%d", trial)
		args, _ := json.Marshal(map[string]any{"Config": cfg, "Namespace": ns, "Key": key})
		var wg, ready sync.WaitGroup
		results := make([]string, n)
		gos := make([]io.WriteCloser, n)
		for i := range n {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRacer$", "-test.v")
			cmd.Env = append(os.Environ(), "AGENTBOX_TEST_RACER="+string(args))
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = cmd.Stdout // one stream: what a failing racer said
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			gos[i] = in
			wg.Add(1)
			ready.Add(1)
			go func() {
				defer wg.Done()
				var all strings.Builder
				isReady := false
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					all.WriteString(sc.Text() + "\n")
					if sc.Text() == "READY" && !isReady {
						isReady = true
						ready.Done()
					}
					if r, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
						results[i] = r
					}
				}
				if !isReady {
					ready.Done()
				}
				err := cmd.Wait()
				if results[i] == "" {
					results[i] = fmt.Sprintf("no result (%v): %s", err, all.String())
				}
			}()
		}
		// Every racer has its manager: go, all at once.
		ready.Wait()
		for _, in := range gos {
			io.WriteString(in, "go\n")
			in.Close()
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
}
