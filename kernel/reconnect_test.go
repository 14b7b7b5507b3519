package kernel_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
)

const childEnv = "AGENTBOX_TEST_CHILD_CONTAINER"

// TestHelperChildClient is not a test on its own: TestReconnectAfterClientKilled
// runs it in a child process, which starts an execution and is then killed.
func TestHelperChildClient(t *testing.T) {
	id := os.Getenv(childEnv)
	if id == "" {
		t.Skip("helper of TestReconnectAfterClientKilled")
	}
	c := dockertest.Dial(t, id)
	_, _ = c.Execute(context.Background(), kernel.ExecRequest{ID: "survivor", Code: "import time\ntime.sleep(2)\nprint('done')\n21*2"}, func(e kernel.Event) {
		if e.Type == kernel.EventStarted {
			os.Stdout.WriteString("RUNNING\n") // the kernel is running it: kill me now
		}
	})
	t.Fatal("the child should have been killed mid-execution")
}

func TestReconnectAfterClientKilled(t *testing.T) {
	id := dockertest.Sandbox(t, nil)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperChildClient$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+id)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	running := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "RUNNING") {
			running = true
			break
		}
	}
	if !running {
		cmd.Wait()
		t.Fatal("child never started its execution")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	c := dockertest.Dial(t, id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Fetch(ctx, "survivor", nil)
	if err != nil {
		t.Fatalf("fetch after the client was killed: %v", err)
	}
	if res.Stdout != "done\n" || plain(res) != "42" || res.Error != nil {
		t.Fatalf("result of the orphaned execution: %+v", res)
	}
	// The kernel is still usable, state intact.
	if got := plain(run(t, c, "21*2")); got != "42" {
		t.Fatalf("kernel after reconnect: %q", got)
	}
}
