package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Host sockets: a stream to a container's init that bypasses the engine.
//
// Every byte of an engine exec's stream crosses the engine and the
// container's shim, two relays that cost more CPU than the work at either
// end: over `docker exec -i` a 100-byte round trip took 0.94 ms where a
// Unix socket took 0.08 ms, and 500 MiB moved at 180-225 MiB/s where the
// socket moved 650-1 370 MiB/s (same container, measured by hand). So where
// the engine runs on this host, each container gets a folder of this host
// mounted at ContainerSocketDir, in which its init listens, and Connect
// dials that socket first, the exec bridge staying the fallback.
//
// What keeps it the init's and the host's alone:
//   - the folder is root's (this process's uid), mode 0700, and so is the
//     socket: the sandbox user can neither reach nor replace it;
//   - before a byte is sent, the peer's credentials must name a process of
//     that container (its cgroup names the container's id), so a socket
//     planted there by anything else (root in a broken-into container could
//     link it to a socket of this host) is never spoken to;
//   - the init checks the peer's uid as for its other sockets.
//
// Where the socket never appears (gVisor keeps a sandbox's sockets in its
// own kernel; an engine on another host mounts its own folder; an engine
// with user namespaces maps the init's root to a uid that cannot write the
// folder), Connect finds nothing and takes the bridge, as before.

// ContainerSocketDir is where a container sees its host socket folder.
const ContainerSocketDir = "/run/agentbox-host"

// hostSocketEnv names the socket's path for the init (agentbox_init.py).
const hostSocketEnv = "AGENTBOX_HOST_SOCKET"

// socketName is the init's socket in its folder.
const socketName = "init.sock"

// maxSocketPath is what a Unix socket's path may hold (sun_path, with its
// terminating zero).
const maxSocketPath = 107

// socketDirFor is the folder of container id's socket under root: a prefix
// of the id keeps the path short enough for a socket's.
func socketDirFor(root, id string) string {
	if len(id) > 16 {
		id = id[:16]
	}
	return filepath.Join(root, id)
}

// defaultSocketRoot is where this process keeps its containers' socket
// folders, made if need be: root's own under /run, anyone else's under the
// temporary folder. "" when none can be made private to this process's
// uid, or when its paths would be too long for a socket.
func defaultSocketRoot() string {
	root := "/run/agentbox/sockets"
	if os.Geteuid() != 0 {
		root = filepath.Join(os.TempDir(), fmt.Sprintf("agentbox-%d", os.Geteuid()), "sockets")
	}
	if len(socketDirFor(root, strings.Repeat("0", 16))+"/"+socketName) > maxSocketPath {
		return ""
	}
	if err := privateDir(root); err != nil {
		return ""
	}
	return root
}

// privateDir makes dir (and its parents) and checks that it is a folder,
// not a link, of this process's uid, that nobody else may enter.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || !fi.IsDir() {
			return fmt.Errorf("%s: not a folder", d)
		}
		// The folder itself must be ours and closed to others; its
		// parents must not be writable by others (or be sticky, as /tmp).
		if d == dir && (int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0) {
			return fmt.Errorf("%s: not private to uid %d", d, os.Geteuid())
		}
		if d != dir && fi.Mode().Perm()&0o002 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("%s: writable by anyone", d)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// pruneEvery is how often Create looks for the folders of containers
// removed behind this driver's back (docker rm, another host's sweep, a
// crash between a container's end and its removal here).
const pruneEvery = time.Minute

// pruner remembers when the socket folders were last pruned.
type pruner struct {
	mu   sync.Mutex
	last time.Time
}

// prune removes, at most once per pruneEvery, the folders whose init is
// gone: no socket, or one nobody listens on (ECONNREFUSED), and older than
// a minute (a container starting has none yet).
func (d Driver) prune() {
	if d.pruned == nil || d.sockets == "" {
		return
	}
	d.pruned.mu.Lock()
	if time.Since(d.pruned.last) < pruneEvery {
		d.pruned.mu.Unlock()
		return
	}
	d.pruned.last = time.Now()
	d.pruned.mu.Unlock()
	entries, err := os.ReadDir(d.sockets)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !e.IsDir() || time.Since(info.ModTime()) < time.Minute {
			continue
		}
		if strings.HasPrefix(e.Name(), "new-") && time.Since(info.ModTime()) < 10*time.Minute {
			continue // a creation under way, however slow
		}
		dir := filepath.Join(d.sockets, e.Name())
		c, err := net.DialTimeout("unix", filepath.Join(dir, socketName), 100*time.Millisecond)
		if err == nil {
			c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist) {
			_ = os.RemoveAll(dir)
		}
	}
}

// newSocketDir makes a fresh folder for a container about to be created,
// named for it once its id is known (claimSocketDir).
func (d Driver) newSocketDir() (string, error) {
	d.prune()
	var b [8]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(d.sockets, "new-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// claimSocketDir names a new container's folder by its id. The container
// keeps its mount whatever the folder is called.
func (d Driver) claimSocketDir(dir, id string) {
	final := socketDirFor(d.sockets, id)
	_ = os.RemoveAll(final) // a folder left by a crash, under a reused prefix
	if err := os.Rename(dir, final); err != nil {
		_ = os.RemoveAll(dir)
	}
}

// removeSocketDir removes container id's folder.
func (d Driver) removeSocketDir(id string) {
	if _, err := hex.DecodeString(id); d.sockets != "" && len(id) == 64 && err == nil {
		_ = os.RemoveAll(socketDirFor(d.sockets, id))
	}
}

// dialHost connects to container id's init over its host socket; nil when
// there is none to dial, it is not the container's (see above), or
// running (nil: not asked) says the container is stopped or frozen.
func (d Driver) dialHost(ctx context.Context, id string, running func(context.Context, string) bool) io.ReadWriteCloser {
	if d.sockets == "" || len(id) < 16 {
		return nil
	}
	path := filepath.Join(socketDirFor(d.sockets, id), socketName)
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		return nil
	}
	if running != nil && !running(ctx, id) {
		return nil
	}
	// A frozen init's full backlog would hold a connect: not long.
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, "unix", path)
	if err != nil {
		return nil
	}
	uc := c.(*net.UnixConn)
	if !peerInContainer(uc, id) {
		c.Close()
		return nil
	}
	return uc
}

// peerInContainer reports whether the process at the other end of c
// belongs to container id, by its cgroup as /proc shows it here.
func peerInContainer(c *net.UnixConn, id string) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil || cred == nil || cred.Pid <= 0 {
		return false
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cred.Pid))
	return err == nil && len(id) == 64 && strings.Contains(string(cg), id)
}
