package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
	"github.com/agentbox/agentbox/session/driver"
)

// lockedSpec is a container locked down as a session's, of the test image.
func lockedSpec(t *testing.T) driver.Spec {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return driver.Spec{
		Name:       "agentbox-hostsock-" + hex.EncodeToString(b[:]),
		Image:      dockertest.Image(t),
		User:       sandboximage.InitUser,
		WorkingDir: "/",
		Labels:     map[string]string{dockertest.LabelTest: t.Name()},
		Env:        []string{sandboximage.UserEnv + "=1000:1000"},
		Tmpfs: map[string]string{
			"/tmp":     "rw,nosuid,nodev,size=16m,mode=1777",
			"/session": "rw,nosuid,nodev,size=16m,uid=1000,gid=1000,mode=0700",
		},
		Network:         "none",
		ReadOnlyRoot:    true,
		MemoryBytes:     256 << 20,
		PidsLimit:       128,
		CapDropAll:      true,
		CapAdd:          sandboximage.InitCapabilities(),
		NoNewPrivileges: true,
		Runtime:         dockertest.Runtime(t),
	}
}

// hostDriver is the Docker driver with host sockets, or skips.
func hostDriver(t *testing.T) docker.Driver {
	dockertest.Engine(t)
	d, closer, err := docker.NewDriver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	if d.SocketRoot() == "" {
		t.Skip("no host sockets: the engine is not on this host, or no private folder could be made for them")
	}
	if strings.Contains(dockertest.Runtime(t), "runsc") {
		t.Skip("gVisor keeps a sandbox's sockets in its own kernel: the host goes through the bridge")
	}
	return d
}

// connectKernel dials id until its init greets, and returns the stream.
func connectKernel(ctx context.Context, t *testing.T, d docker.Driver, id string) (*kernel.Client, any) {
	t.Helper()
	for ctx.Err() == nil {
		rw, err := d.Connect(ctx, id)
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := kernel.NewClient(hctx, rw)
		cancel()
		if err == nil {
			return c, rw
		}
		if errors.Is(err, kernel.ErrProtocolMismatch) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the kernel never greeted")
	return nil, nil
}

// TestConnectOverTheHostSocket: on an engine of this host, the stream to
// a container's init is the init's host socket, not an engine exec; it
// serves the kernel; its folder goes with the container.
func TestConnectOverTheHostSocket(t *testing.T) {
	t.Parallel()
	d := hostDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := d.Create(ctx, lockedSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Remove(context.Background(), id) })
	// The first dial may come before the init listens (the bridge then):
	// the next ones find the socket.
	waitUntil(t, "the init's host socket", func() bool {
		_, err := os.Lstat(filepath.Join(docker.SocketDirFor(d.SocketRoot(), id), docker.SocketName))
		return err == nil
	})
	c, rw := connectKernel(ctx, t, d, id)
	defer c.Close()
	if _, ok := rw.(*net.UnixConn); !ok {
		t.Fatalf("the stream is a %T, not the host socket", rw)
	}
	res, err := c.Execute(ctx, kernel.ExecRequest{Code: "6*7"}, nil)
	if err != nil || len(res.Outputs) == 0 || res.Outputs[0].Data["text/plain"] != "42" {
		t.Fatalf("6*7 over the host socket: %+v, %v", res, err)
	}
	// Out of the sandbox user's reach: the folder is root's, mode 0700.
	out, err := exec.CommandContext(ctx, "docker", "exec", "-u", "1000:1000", id, "python3", "-c",
		"import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('"+docker.ContainerSocketDir+"/"+docker.SocketName+"')\n    print('connected')\nexcept OSError as e:\n    print(e.errno)").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "13" { // EACCES
		t.Errorf("the sandbox user dialing the init's host socket: %q, %v; want errno 13", out, err)
	}
	if err := d.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(docker.SocketDirFor(d.SocketRoot(), id)); !os.IsNotExist(err) {
		t.Errorf("the container's socket folder after Remove: %v", err)
	}
}

// TestPlantedHostSocketIsNotDialed: a socket in a container's folder whose
// listener is not a process of that container (root in a broken-into
// container could link it to any socket of this host) is never spoken
// to: Connect takes the bridge.
func TestPlantedHostSocketIsNotDialed(t *testing.T) {
	t.Parallel()
	root, err := os.MkdirTemp("", "abs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	d := docker.Driver{}.WithSocketRoot(root)
	id := strings.Repeat("ab", 32)
	dir := docker.SocketDirFor(root, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, docker.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var buf [64]byte
		n, _ := c.Read(buf[:])
		got <- n
	}()
	if rw := d.DialHost(context.Background(), id); rw != nil {
		rw.Write([]byte("hello?"))
		rw.Close()
		t.Fatal("dialed a socket this process planted as a container's init")
	}
	select {
	case n := <-got:
		if n != 0 {
			t.Errorf("the planted socket received %d bytes", n)
		}
	case <-time.After(10 * time.Second):
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPruneSocketFolders: the folders of containers gone behind the
// driver's back go, once a minute old; those of a live init, or too new
// to have one yet, stay.
func TestPruneSocketFolders(t *testing.T) {
	t.Parallel()
	root, err := os.MkdirTemp("", "abs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	old := time.Now().Add(-2 * time.Minute)
	mk := func(name string) string {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	gone, dead, live, young := mk("gone"), mk("dead"), mk("live"), mk("young")
	ln, err := net.Listen("unix", filepath.Join(live, docker.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// A socket nobody listens on any more: an init that died.
	dl, err := net.Listen("unix", filepath.Join(dead, docker.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	dl.(*net.UnixListener).SetUnlinkOnClose(false)
	dl.Close()
	for _, dir := range []string{gone, dead, live} {
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
	}
	docker.Driver{}.WithSocketRoot(root).PruneNow()
	for dir, want := range map[string]bool{gone: false, dead: false, live: true, young: true} {
		_, err := os.Stat(dir)
		if got := err == nil; got != want {
			t.Errorf("%s kept %v, want %v", filepath.Base(dir), got, want)
		}
	}
}
