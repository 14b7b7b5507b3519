package session_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// The channel (session/channel.go): files API calls and shell commands run
// as tools the init forks, over one kept connection per container. These
// are its faults.

// blockingWriter takes nothing until released: a command's reader that
// stops reading.
type blockingWriter struct{ release chan struct{} }

func (w blockingWriter) Write(p []byte) (int, error) { <-w.release; return len(p), nil }

// TestChannelFloodBesideRead: a command that floods its output to a
// reader that takes nothing holds only itself; a file read of several
// windows on the same channel meanwhile gets every byte.
func TestChannelFloodBesideRead(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.MaxOutputBytes = 64 << 20 }, session.WithChannel(true))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	data := bytes.Repeat([]byte("agentbox channel "), (8<<20)/17)
	if _, err := m.WriteFile(ctx, "k", "/session/big", bytes.NewReader(data), 0); err != nil {
		t.Fatal(err)
	}
	w := blockingWriter{release: make(chan struct{})}
	ran := make(chan error, 1)
	cmdCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_, err := m.Run(cmdCtx, "k", session.Command{Line: "yes agentbox", Stdout: w})
		ran <- err
	}()
	// The flood has begun when its reader is stuck: the first write waits.
	waitFor(t, "the command to flood", func() bool {
		out, _ := m.Run(ctx, "k", session.Command{Line: "pgrep -x yes"})
		return out != nil && out.ExitCode == 0
	})
	for i := 0; i < 3; i++ {
		got := readAll(t, m, "k", "/session/big", 0, -1)
		if sha256.Sum256([]byte(got)) != sha256.Sum256(data) {
			t.Fatalf("read %d of the file beside the flood: %d bytes, not the %d written", i, len(got), len(data))
		}
	}
	stop()
	close(w.release)
	select {
	case <-ran:
	case <-time.After(time.Minute):
		t.Fatal("the flooding command did not end when its context did")
	}
}

// TestChannelHundredAtOnce: 100 operations at once on one session, files
// and commands mixed, each with its own answer.
func TestChannelHundredAtOnce(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil, session.WithChannel(true))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mustExec(t, m, "k", "x = 1")
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("/session/f%d", i)
			want := strings.Repeat(fmt.Sprint(i), 1000+i)
			switch i % 3 {
			case 0:
				res, err := m.Run(ctx, "k", session.Command{Line: fmt.Sprintf("echo %d", i)})
				if err != nil {
					errs <- fmt.Errorf("run %d: %w", i, err)
				} else if res.Stdout != fmt.Sprintf("%d\n", i) {
					errs <- fmt.Errorf("run %d: stdout %q", i, res.Stdout)
				}
			default:
				if _, err := m.WriteFile(ctx, "k", name, strings.NewReader(want), 0); err != nil {
					errs <- fmt.Errorf("write %d: %w", i, err)
					return
				}
				r, err := m.ReadFile(ctx, "k", name, 0, -1)
				if err != nil {
					errs <- fmt.Errorf("read %d: %w", i, err)
					return
				}
				got, err := io.ReadAll(r)
				r.Close()
				if err != nil || string(got) != want {
					errs <- fmt.Errorf("read %d: %d bytes (%v), want %d", i, len(got), err, len(want))
				}
				if fi, err := m.StatFile(ctx, "k", name); err != nil || fi.Size != int64(len(want)) {
					errs <- fmt.Errorf("stat %d: %+v, %v", i, fi, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if out := plain(mustExec(t, m, "k", "x")); out != "1" {
		t.Errorf("x = %s after the operations", out)
	}
}

// TestChannelTransferCutByKill: a large write and a large read whose
// container is killed midway end with ErrSessionLost, never hang.
func TestChannelTransferCutByKill(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"write", "read"} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, func(c *config.Config) { c.TmpfsSizeMB = 256 }, session.WithChannel(true))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			mustExec(t, m, "k", "pass")
			id := containerOf(t, m, "k")
			if dir == "read" {
				if _, err := m.WriteFile(ctx, "k", "/session/big", io.LimitReader(zeros{}, 128<<20), 0); err != nil {
					t.Fatal(err)
				}
			}
			killed := make(chan struct{})
			var once sync.Once
			kill := func() {
				once.Do(func() {
					if out, err := exec.Command("docker", "kill", id).CombinedOutput(); err != nil {
						t.Errorf("docker kill: %v: %s", err, out)
					}
					close(killed)
				})
			}
			done := make(chan error, 1)
			go func() {
				if dir == "write" {
					// 1 GiB, and the kill after the first 8 MiB are in.
					_, err := m.WriteFile(ctx, "k", "/session/cut", &killAfter{left: 1 << 30, at: 8 << 20, kill: kill}, 0)
					done <- err
					return
				}
				r, err := m.ReadFile(ctx, "k", "/session/big", 0, -1)
				if err != nil {
					done <- err
					return
				}
				defer r.Close()
				_, err = io.Copy(io.Discard, &killAfter{r: r, left: 1 << 30, at: 8 << 20, kill: kill})
				done <- err
			}()
			select {
			case err := <-done:
				<-killed
				if !errors.Is(err, session.ErrSessionLost) {
					t.Fatalf("a %s cut by a killed container: %v, want ErrSessionLost", dir, err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("the %s hung after its container was killed", dir)
			}
		})
	}
}

// killAfter reads zeros (or r), calling kill once at bytes in, and then
// slows down so that the transfer is still going when the container dies.
type killAfter struct {
	r        io.Reader
	left, at int64
	n        int64
	kill     func()
}

func (k *killAfter) Read(p []byte) (int, error) {
	if k.left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), k.left, 64<<10)]
	n := len(p)
	var err error
	if k.r != nil {
		n, err = k.r.Read(p)
	} else {
		clear(p)
	}
	k.n += int64(n)
	k.left -= int64(n)
	if k.n >= k.at {
		k.kill()
		time.Sleep(5 * time.Millisecond)
	}
	return n, err
}

// TestChannelClosedMidCommand: the channel's stream to PID 1 ends while a
// command runs: the command's call ends with an error, the command is
// killed with it (its supervisor saw its input end), and the next call
// opens a new channel. The stream ends either way it can: its bridge is
// killed in the container (an engine exec's stream), or the host closes
// its end (the init's host socket, where there is no bridge).
func TestChannelClosedMidCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		bridge bool
	}{{"bridge killed", true}, {"host socket closed", false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dockertest.Engine(t)
			d, closer, err := docker.NewDriver()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closer.Close() })
			if c.bridge {
				d = d.WithoutHostSockets()
			}
			cd := &closingDriver{Driver: d}
			m := newManager(t, nil, session.WithChannel(true), session.WithDriver(cd))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			mustExec(t, m, "k", "x = 5")
			id := containerOf(t, m, "k")
			done := make(chan error, 1)
			go func() {
				_, err := m.Run(ctx, "k", session.Command{Line: "touch /session/began; exec sleep 600"})
				done <- err
			}()
			waitFor(t, "the command to begin", func() bool {
				_, err := m.StatFile(ctx, "k", "/session/began")
				return err == nil
			})
			// All of them: the executions' stream reconnects by itself,
			// and so must the channel.
			if c.bridge {
				if out, err := exec.Command("docker", "exec", "-u", "0", id, "pkill", "-KILL", "-f", "agentbox_bridge.py").CombinedOutput(); err != nil {
					t.Fatalf("kill the bridges: %v: %s", err, out)
				}
			} else if n := cd.closeAll(); n == 0 {
				t.Fatal("no stream to close")
			}
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a command whose channel closed under it reported success")
				}
			case <-time.After(time.Minute):
				t.Fatal("the command's call hung after its channel closed")
			}
			waitFor(t, "the command to be killed with its channel", func() bool {
				res, err := m.Run(ctx, "k", session.Command{Line: "pgrep -x sleep"})
				return err == nil && res.ExitCode == 1
			})
			res, err := m.Run(ctx, "k", session.Command{Line: "echo again"})
			if err != nil || res.Stdout != "again\n" {
				t.Fatalf("a command after the channel closed: %+v, %v", res, err)
			}
			if out := plain(mustExec(t, m, "k", "x")); out != "5" {
				t.Errorf("x = %s after the channel closed", out)
			}
		})
	}
}

// closingDriver is the Docker driver, every capability of it, that can
// close every stream to an init it opened, as a broken connection would.
type closingDriver struct {
	docker.Driver
	mu      sync.Mutex
	streams []io.Closer
}

func (d *closingDriver) Connect(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	rw, err := d.Driver.Connect(ctx, id)
	if err == nil {
		d.mu.Lock()
		d.streams = append(d.streams, rw)
		d.mu.Unlock()
	}
	return rw, err
}

func (d *closingDriver) closeAll() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.streams {
		s.Close()
	}
	n := len(d.streams)
	d.streams = nil
	return n
}

// TestChannelToolsOutOfReach: sandbox code cannot reach the tools' pipes.
// They are the init's (root's, mode 0600), so /proc/PID/fd of a tool does
// not reopen them for code of the sandbox user; and the files tool, which
// runs as that user, is forked from the undumpable init and never exec'd,
// so that code can neither read its memory nor trace it (and write on its
// descriptors for it); the command tool is root's. Code that could do
// either could forge a file call's answers or read another call's bytes.
func TestChannelToolsOutOfReach(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.TmpfsSizeMB = 128 }, session.WithChannel(true))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := m.WriteFile(ctx, "k", "/session/big", io.LimitReader(zeros{}, 32<<20), 0); err != nil {
		t.Fatal(err)
	}
	// A read nobody reads: its tool waits, its pipes open.
	r, err := m.ReadFile(ctx, "k", "/session/big", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// And a command that waits.
	ran := make(chan error, 1)
	go func() {
		_, err := m.Run(ctx, "k", session.Command{Line: "touch /session/began; exec sleep 300"})
		ran <- err
	}()
	// Running before the execution below takes the session's turn.
	waitFor(t, "the command to begin", func() bool {
		_, err := m.StatFile(ctx, "k", "/session/began")
		return err == nil
	})
	res := mustExec(t, m, "k", `
import os, time
def tools():
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit(): continue
        try:
            with open("/proc/%s/comm" % pid) as f: name = f.read().strip()
        except OSError: continue
        if name in ("agentbox-files", "agentbox-cmd"): found[int(pid)] = name
    return found
deadline = time.time() + 60
while time.time() < deadline:
    found = tools()
    if sorted(set(found.values())) == ["agentbox-cmd", "agentbox-files"]: break
    time.sleep(0.05)
opened = []
for pid, name in sorted(found.items()):
    for fd in (0, 1, 2):
        for how in (os.O_RDONLY, os.O_WRONLY):
            try:
                os.close(os.open("/proc/%d/fd/%d" % (pid, fd), how | os.O_NONBLOCK))
                opened.append((name, fd, how))
            except OSError:
                pass
    # Its memory: whoever may read it may also trace the process and
    # write on its descriptors for it.
    try:
        os.close(os.open("/proc/%d/mem" % pid, os.O_RDONLY))
        opened.append((name, "mem"))
    except OSError:
        pass
print(sorted(set(found.values())), opened)
`)
	if got := strings.TrimSpace(res.Stdout); got != "['agentbox-cmd', 'agentbox-files'] []" {
		select {
		case err := <-ran:
			t.Logf("the command ended: %v", err)
		default:
		}
		t.Fatalf("tools seen and their fds opened by sandbox code: %s (stderr %s)", got, res.Stderr)
	}
}

// TestChannelGoesWithItsSession: a session that ends takes its channel
// with it. Before, the Manager kept each ended container's channel (its
// closed client) until that container's id was asked for again, which
// it never is: one entry per session ever served, for the process's life.
func TestChannelGoesWithItsSession(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.WriteFile(ctx, "k", "/session/a.txt", strings.NewReader("a"), 0); err != nil {
		t.Fatal(err)
	}
	if n := session.OpenChannels(m); n != 1 {
		t.Fatalf("%d channels open after a files call, want 1", n)
	}
	if err := m.Stop(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stopped session's channel to go", func() bool { return session.OpenChannels(m) == 0 })
}
