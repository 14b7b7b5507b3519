package kernel_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
)

func run(t *testing.T, c *kernel.Client, code string) *kernel.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: code}, nil)
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return res
}

func plain(res *kernel.Result) string {
	for _, o := range res.Outputs {
		if o.Kind == "execute_result" {
			return o.Data["text/plain"]
		}
	}
	return ""
}

func TestStatePersists(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil))
	run(t, c, "import math\nx = 41\ndef f(a):\n    return a + 1\nclass K:\n    v = 2")
	res := run(t, c, "f(x) + K.v - 2 + int(math.sqrt(0))")
	if got := plain(res); got != "42" {
		t.Fatalf("trailing expression = %q, want 42 (result %+v)", got, res)
	}
	if got := plain(run(t, c, "__name__")); got != "'__main__'" {
		t.Fatalf("__name__ = %s", got)
	}
	if res := run(t, c, "None"); len(res.Outputs) != 0 {
		t.Fatalf("None produced outputs: %+v", res.Outputs)
	}
}

func TestOutputCapturedAtDescriptorLevel(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil))
	var mu sync.Mutex
	var events []kernel.Event
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := `import os, sys, subprocess, ctypes
print("one")
sys.stderr.write("two\n")
os.system("echo three")
subprocess.run(["sh", "-c", "echo four >&2"])
ctypes.CDLL(None).printf(b"five\n")
os.write(1, b"bad \xff\xfe bytes\n")
print("unicode \u00e9\u4e16")`
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: code}, func(e kernel.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("error: %+v", res.Error)
	}
	for _, want := range []string{"one\n", "three\n", "five\n", "bad \ufffd\ufffd bytes\n", "unicode \u00e9\u4e16\n"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout %q lacks %q", res.Stdout, want)
		}
	}
	for _, want := range []string{"two\n", "four\n"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("stderr %q lacks %q", res.Stderr, want)
		}
	}
	if strings.Index(res.Stdout, "one") > strings.Index(res.Stdout, "three") {
		t.Errorf("stdout out of order: %q", res.Stdout)
	}
	mu.Lock()
	defer mu.Unlock()
	streams := 0
	for _, e := range events {
		if e.Type == kernel.EventStream {
			streams++
		}
	}
	if streams == 0 {
		t.Fatalf("no stream events delivered; events: %+v", events)
	}
}

func TestStreamsWhileRunning(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil))
	first := make(chan time.Time, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: "import time\nprint('early', flush=True)\ntime.sleep(1.5)\nprint('late')"}, func(e kernel.Event) {
		if e.Type == kernel.EventStream {
			select {
			case first <- time.Now():
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	got := <-first
	// The first line must arrive before the code ended (it sleeps 1.5 s after it).
	if end.Sub(got) < time.Second {
		t.Fatalf("first output arrived %v before the end: not streamed", end.Sub(got))
	}
	if res.Stdout != "early\nlate\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
}

func TestRichResults(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil))
	res := run(t, c, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf")
	if len(res.Outputs) != 1 || !strings.Contains(res.Outputs[0].Data["text/html"], "<table") || res.Outputs[0].Data["text/plain"] == "" {
		t.Fatalf("DataFrame result: %+v", res.Outputs)
	}
	res = run(t, c, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\ndisplay('shown')\nNone")
	var png, shown bool
	for _, o := range res.Outputs {
		if strings.HasPrefix(o.Data["image/png"], "iVBORw0KGgo") {
			png = true
		}
		if o.Data["text/plain"] == "'shown'" && o.Kind == "display_data" {
			shown = true
		}
	}
	if !png || !shown {
		t.Fatalf("want a PNG figure and a display(): %+v", res)
	}
	if res := run(t, c, "len(plt.get_fignums())"); plain(res) != "0" {
		t.Fatalf("figures not closed after the cell: %s", plain(res))
	}
}

func TestStructuredErrors(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil))
	res := run(t, c, "def g():\n    return 1/0\ng()")
	if res.Error == nil || res.Error.Name != "ZeroDivisionError" || res.Error.Value != "division by zero" {
		t.Fatalf("error: %+v", res.Error)
	}
	tb := strings.Join(res.Error.Traceback, "\n")
	if !strings.Contains(tb, "<cell-") || strings.Contains(tb, "agentbox_kernel") {
		t.Fatalf("traceback should show the user's code only:\n%s", tb)
	}
	res2 := run(t, c, "x = 1\ny = (")
	if res2.Error == nil || res2.Error.Name != "SyntaxError" || !strings.Contains(strings.Join(res2.Error.Traceback, "\n"), "line 2") {
		t.Fatalf("syntax error: %+v", res2.Error)
	}
	if res2.ExecutionCount != res.ExecutionCount+1 {
		t.Fatalf("execution count %d after %d", res2.ExecutionCount, res.ExecutionCount)
	}
}

func TestTimeoutKeepsState(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil))
	run(t, c, "x = 7")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: "while True: pass"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Error == nil || res.Error.Name != "KeyboardInterrupt" || res.StateLost {
		t.Fatalf("want a KeyboardInterrupt that kept state, got %+v", res)
	}
	if got := plain(run(t, c, "x")); got != "7" {
		t.Fatalf("x = %q after the interrupt", got)
	}
}

func TestKernelSideTimeout(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: "import time\ntime.sleep(30)", Timeout: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
		t.Fatalf("%+v", res)
	}
}

func TestIgnoredInterruptRestartsKernel(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil)) // grace is 2 s in tests
	run(t, c, "x = 1")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.StateLost || !res.KernelRestarted || res.Error == nil || res.Error.Name != "KernelKilled" {
		t.Fatalf("want state lost and a restart: %+v", res)
	}
	res = run(t, c, "'x' in globals()")
	if plain(res) != "False" {
		t.Fatalf("state should be gone after the restart: %+v", res)
	}
}

func TestCrashesAreIsolated(t *testing.T) {
	id := dockertest.Sandbox(t, nil)
	c := dockertest.Dial(t, id)
	run(t, c, "open('/session/keep.txt', 'w').write('kept')")
	cases := []struct {
		code string
		want string
	}{
		{"import os\nos._exit(3)", "exited with code 3"},
		{"import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "signal 9"},
		{"import ctypes\nctypes.string_at(0)", "signal 11"},
	}
	for _, tc := range cases {
		res := run(t, c, tc.code)
		if res.Error == nil || res.Error.Name != "KernelDied" || !strings.Contains(res.Error.Value, tc.want) || !res.StateLost || !res.KernelRestarted {
			t.Fatalf("%q: want KernelDied (%s), got %+v", tc.code, tc.want, res.Error)
		}
		if got := plain(run(t, c, "open('/session/keep.txt').read()")); got != "'kept'" {
			t.Fatalf("file under /session lost after %q: %q", tc.code, got)
		}
	}
}

func TestOutOfMemoryIsNamed(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil)) // 512 MiB, no swap
	res := run(t, c, "b = bytearray(2 * 1024**3)")
	if res.Error == nil {
		t.Fatalf("allocating twice the memory limit did not fail")
	}
	// Either Python sees MemoryError (allocation refused) or the OOM killer
	// ends the kernel; the latter must be named as such.
	if res.Error.Name != "MemoryError" && res.Error.Name != "OutOfMemory" {
		t.Fatalf("want MemoryError or OutOfMemory, got %+v", res.Error)
	}
	// numpy touches every page, so the kernel's cgroup hits its limit: the
	// OOM killer ends the worker, and the result must say so by name.
	res = run(t, c, "import numpy as np\na = np.ones(2 * 1024**3 // 8)\na.sum()")
	if res.Error == nil || res.Error.Name != "OutOfMemory" || !strings.Contains(res.Error.Value, "out-of-memory") || !res.StateLost {
		t.Fatalf("numpy over the limit: want OutOfMemory, got %+v", res.Error)
	}
	if got := plain(run(t, c, "1+1")); got != "2" {
		t.Fatalf("kernel unusable after OOM: %q", got)
	}
}

// TestOutputCap: the init caps each stream at the AGENTBOX_MAX_OUTPUT it
// was started with (not at its own default, and not at whatever its hello
// claims), keeping the head and the tail.
func TestOutputCap(t *testing.T) {
	const limit = 5000
	id := dockertest.Sandbox(t, func(spec *docker.ContainerSpec) {
		spec.Env = append(spec.Env, "AGENTBOX_MAX_OUTPUT="+strconv.Itoa(limit))
	})
	c := dockertest.Dial(t, id)
	if got := c.Hello().MaxOutput; got != limit {
		t.Errorf("hello says max_output %d, the container was given %d", got, limit)
	}
	// The init's own time limit ends the loop, not the caller's context: a
	// context that ends leaves the client InterruptWait for the result,
	// which a loaded machine can overrun. The context is a safety net.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: "while True: print('x' * 10000)", Timeout: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) < limit/2 || len(res.Stdout) > limit+200 {
		t.Fatalf("stdout %d bytes, cap %d", len(res.Stdout), limit)
	}
	if res.Truncated["stdout"] == 0 || !strings.Contains(res.Stdout, "bytes of stdout cut here") {
		t.Fatalf("no cut marker; truncated=%v", res.Truncated)
	}
	if !strings.HasSuffix(strings.TrimRight(res.Stdout, "\n"), "x") {
		t.Fatalf("tail not kept: %q", res.Stdout[len(res.Stdout)-100:])
	}
}

func TestLargeSource(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil))
	code := "s = '" + strings.Repeat("a", 1<<20) + "'\nlen(s)"
	if got := plain(run(t, c, code)); got != "1048576" {
		t.Fatalf("len = %q", got)
	}
}

func TestTwoClientsAndReconnect(t *testing.T) {
	id := dockertest.Sandbox(t, nil)
	a := dockertest.Dial(t, id)
	b := dockertest.Dial(t, id)
	run(t, a, "shared = 'from a'")
	if got := plain(run(t, b, "shared")); got != "'from a'" {
		t.Fatalf("second client sees %q", got)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 10; i++ {
		for _, c := range []*kernel.Client{a, b} {
			wg.Add(1)
			go func(c *kernel.Client, i int) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				marker := kernel.NewID()
				res, err := c.Execute(ctx, kernel.ExecRequest{ID: marker, Code: "print('" + marker + "')"}, nil)
				if err != nil {
					errs <- err
					return
				}
				if res.Stdout != marker+"\n" {
					errs <- errors.New("got another client's output: " + res.Stdout)
				}
			}(c, i)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// A client goes away mid-execution; a new one fetches the result by id.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = a.Execute(ctx, kernel.ExecRequest{ID: "long-1", Code: "import time\ntime.sleep(1)\nprint('finished')\n6*7"}, nil)
	}()
	time.Sleep(300 * time.Millisecond)
	a.Close()
	<-done
	c := dockertest.Dial(t, id)
	res, err := c.Fetch(ctx, "long-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "finished\n" || plain(res) != "42" {
		t.Fatalf("fetched %+v", res)
	}
	// Asking again with the same id replays instead of running twice.
	res, err = c.Execute(ctx, kernel.ExecRequest{ID: "long-1", Code: "import time\ntime.sleep(1)\nprint('finished')\n6*7"}, nil)
	if err != nil || !res.Replayed || res.Stdout != "finished\n" {
		t.Fatalf("duplicate id: %+v, %v", res, err)
	}
	if _, err := c.Fetch(ctx, "never-ran", nil); !errors.Is(err, kernel.ErrUnknownExecution) {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestClosedClientEndsItsBridge checks that the init lets go of a stream the
// bridge handed over once its client hangs up, so the bridge (and the engine's
// exec) ends instead of piling up.
func TestClosedClientEndsItsBridge(t *testing.T) {
	id := dockertest.Sandbox(t, nil)
	a := dockertest.Dial(t, id)
	b := dockertest.Dial(t, id)
	const count = "import os\n" +
		"n = 0\n" +
		"for p in os.listdir('/proc'):\n" +
		"    try:\n" +
		"        n += p.isdigit() and b'agentbox_bridge' in open('/proc/%s/cmdline' % p, 'rb').read()\n" +
		"    except OSError:\n" +
		"        pass\n" +
		"n"
	if got := plain(run(t, b, count)); got != "2" {
		t.Fatalf("%s bridges with two clients open", got)
	}
	b.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := plain(run(t, a, count))
		if got == "1" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s bridges 10 s after one of two clients closed", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestInspect(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil))
	run(t, c, "import numpy as np\nimport json as j\narr = np.zeros((3, 4))\nname = 'abc'")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := c.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]kernel.Variable{}
	for _, v := range st.Variables {
		vars[v.Name] = v
	}
	if v, ok := vars["arr"]; !ok || v.Type != "numpy.ndarray" || v.Size == nil || *v.Size != 96 {
		t.Fatalf("arr: %+v", vars["arr"])
	}
	if v, ok := vars["name"]; !ok || v.Repr != "'abc'" {
		t.Fatalf("name: %+v", v)
	}
	if _, ok := vars["display"]; ok {
		t.Fatalf("kernel helpers listed as user variables")
	}
	mods := map[string]string{}
	for _, m := range st.Modules {
		mods[m.Name] = m.Module
	}
	if mods["np"] != "numpy" || mods["j"] != "json" {
		t.Fatalf("modules: %+v", st.Modules)
	}
}

func TestScan(t *testing.T) {
	c := dockertest.Dial(t, dockertest.Sandbox(t, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	files, more, err := c.Scan(ctx, "/session/artifacts", 100)
	if err != nil || len(files) != 0 || more {
		t.Fatalf("missing folder: %v %v %v", files, more, err)
	}
	run(t, c, `import os
os.makedirs("/session/artifacts/sub/deeper")
open("/session/artifacts/a.txt", "w").write("abc")
open("/session/artifacts/sub/deeper/b c.csv", "w").write("x,y\n")
os.symlink("/etc/passwd", "/session/artifacts/link")
os.mkfifo("/session/artifacts/fifo")
open(os.fsencode("/session/artifacts/") + b"bad\xff", "w").write("?")`)
	files, more, err = c.Scan(ctx, "/session/artifacts", 100)
	if err != nil || more {
		t.Fatal(err, more)
	}
	got := map[string]kernel.File{}
	for _, f := range files {
		got[f.Path] = f
	}
	want := map[string]string{"a.txt": "file", "sub/deeper/b c.csv": "file", "link": "link", "fifo": "other", "bad\ufffd": "badname"}
	if len(got) != len(want) {
		t.Fatalf("scan: %+v", files)
	}
	for p, kind := range want {
		if got[p].Kind != kind {
			t.Errorf("%s: %+v, want kind %s", p, got[p], kind)
		}
	}
	if f := got["a.txt"]; f.Size != 3 || f.MtimeNS == 0 {
		t.Errorf("a.txt: %+v", f)
	}
	if files, more, err := c.Scan(ctx, "/session/artifacts", 2); err != nil || len(files) != 2 || !more {
		t.Fatalf("limit 2: %d files, more %v, %v", len(files), more, err)
	}
	if _, _, err := c.Scan(ctx, "relative", 2); !errors.Is(err, kernel.ErrRejected) {
		t.Fatalf("relative path: %v", err)
	}
}
