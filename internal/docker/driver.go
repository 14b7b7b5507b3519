package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	sandboximage "github.com/agentbox/agentbox/sandbox-image"
	"github.com/agentbox/agentbox/session/driver"
)

// Driver is the session/driver.Driver over the Docker engine, with every
// optional capability of that package; session.NewDockerDriver returns it.
// The Docker SDK itself stays behind Client.
type Driver struct {
	cli *Client
	// sockets is the folder of the containers' host socket folders (see
	// hostsocket.go); "" when the engine is not on this host, and every
	// stream goes through an exec.
	sockets string
	pruned  *pruner
}

// Interface checks: the Docker driver has the whole contract.
var (
	_ driver.Driver          = Driver{}
	_ driver.CommandStreamer = Driver{}
	_ driver.ExecStreamer    = Driver{}
	_ driver.CommandRunner   = Driver{}
	_ driver.FileReader      = Driver{}
	_ driver.FileWriter      = Driver{}
	_ driver.FileRemover     = Driver{}
	_ driver.HostRooter      = Driver{}
	_ driver.Pauser          = Driver{}
	_ driver.MemoryReader    = Driver{}
	_ driver.EngineMemory    = Driver{}
)

// NewDriver returns the Docker Driver, reaching the engine the way the
// docker command does (DOCKER_HOST and friends). Close it when done.
func NewDriver() (Driver, io.Closer, error) {
	cli, err := New()
	if err != nil {
		return Driver{}, nil, driverError(err)
	}
	d := Driver{cli: cli}
	if strings.HasPrefix(cli.Host(), "unix://") {
		d.sockets, d.pruned = defaultSocketRoot(), &pruner{}
	}
	return d, cli, nil
}

// WithoutHostSockets is d with every stream through the engine's exec, as
// for an engine on another host: what tests of the bridge's faults use.
func (d Driver) WithoutHostSockets() Driver {
	d.sockets = ""
	return d
}

// driverError maps engine errors onto session/driver's sentinels, keeping
// the engine's message.
func driverError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnreachable):
		return fmt.Errorf("%w: %w", driver.ErrUnavailable, err)
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%w: %w", driver.ErrContainerNotFound, err)
	case errors.Is(err, ErrConflict):
		return fmt.Errorf("%w: %w", driver.ErrNameInUse, err)
	case errors.Is(err, ErrStart):
		return fmt.Errorf("%w: %w", driver.ErrContainerStart, err)
	}
	return err
}

func (d Driver) Image(ctx context.Context, ref string) (driver.Image, error) {
	img, err := d.cli.InspectImage(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		return driver.Image{}, fmt.Errorf("%w: %s: build it with sandbox-setup", driver.ErrImageMissing, ref)
	}
	if err != nil {
		return driver.Image{}, driverError(err)
	}
	return driver.Image{ID: img.ID, Labels: img.Labels}, nil
}

// EngineMemory is the memory of the engine's host (a remote or desktop
// engine's, not this process's), as the engine reports it.
func (d Driver) EngineMemory(ctx context.Context) (int64, error) {
	info, err := d.cli.Info(ctx)
	if err != nil {
		return 0, driverError(err)
	}
	return info.MemTotal, nil
}

func (d Driver) Create(ctx context.Context, s driver.Spec) (string, error) {
	spec := ContainerSpec{
		Name:            s.Name,
		Image:           s.Image,
		Env:             s.Env,
		User:            s.User,
		WorkingDir:      s.WorkingDir,
		Labels:          s.Labels,
		NetworkMode:     s.Network,
		ReadOnlyRoot:    s.ReadOnlyRoot,
		Tmpfs:           s.Tmpfs,
		MemoryBytes:     s.MemoryBytes,
		NoSwap:          s.NoSwap,
		ShmBytes:        s.ShmBytes,
		OomScoreAdj:     s.OomScoreAdj,
		NanoCPUs:        s.NanoCPUs,
		PidsLimit:       s.PidsLimit,
		CapDropAll:      s.CapDropAll,
		CapAdd:          s.CapAdd,
		NoNewPrivileges: s.NoNewPrivileges,
		Seccomp:         s.Seccomp,
		Runtime:         s.Runtime,
	}
	for _, m := range s.Mounts {
		spec.Mounts = append(spec.Mounts, Mount{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	var sockDir string
	if d.sockets != "" {
		if dir, err := d.newSocketDir(); err == nil {
			sockDir = dir
			spec.Mounts = append(spec.Mounts, Mount{Source: dir, Target: ContainerSocketDir})
			spec.Env = append(slices.Clip(spec.Env), hostSocketEnv+"="+ContainerSocketDir+"/"+socketName)
		}
	}
	id, err := d.cli.CreateContainer(ctx, spec)
	if sockDir != "" {
		if err != nil {
			_ = os.RemoveAll(sockDir)
		} else {
			d.claimSocketDir(sockDir, id)
		}
	}
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("%w: %s: build it with sandbox-setup: %w", driver.ErrImageMissing, s.Image, err)
	}
	return id, driverError(err)
}

func (d Driver) Connect(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	if c := d.dialHost(ctx, id, d.running); c != nil {
		return c, nil
	}
	// As root: the init hands the kernel only to a peer of its own uid,
	// which the sandbox user's code can never be.
	s, err := d.cli.Exec(ctx, id, sandboximage.BridgeUser, sandboximage.BridgeCommand())
	if errors.Is(err, ErrConflict) {
		// The engine's answer for a container that is not running.
		return nil, fmt.Errorf("connect to container %s: not running: %w", short(id), err)
	}
	if err != nil {
		return nil, driverError(err)
	}
	return s, nil
}

// running reports whether container id runs and is not frozen: a frozen
// init's socket takes a connection and never greets it, where the engine
// refuses an exec into it at once (the errors Connect has always given).
func (d Driver) running(ctx context.Context, id string) bool {
	st, err := d.cli.InspectContainer(ctx, id)
	return err == nil && st.Running && !st.Paused
}

func (d Driver) Inspect(ctx context.Context, idOrName string) (driver.Container, error) {
	st, err := d.cli.InspectContainer(ctx, idOrName)
	if err != nil {
		return driver.Container{}, driverError(err)
	}
	return driverContainer(st), nil
}

func (d Driver) List(ctx context.Context, labels map[string]string) ([]driver.Container, error) {
	var filter []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		filter = append(filter, k+"="+labels[k])
	}
	list, err := d.cli.ListContainers(ctx, filter...)
	if err != nil {
		return nil, driverError(err)
	}
	out := make([]driver.Container, 0, len(list))
	for _, st := range list {
		out = append(out, driverContainer(st))
	}
	return out, nil
}

func (d Driver) Rename(ctx context.Context, id, name string) error {
	return driverError(d.cli.RenameContainer(ctx, id, name))
}

func (d Driver) Remove(ctx context.Context, id string) error {
	err := d.cli.RemoveContainer(ctx, id)
	if err == nil || errors.Is(err, ErrNotFound) {
		d.removeSocketDir(id)
	}
	return driverError(err)
}

// ReadFiles streams the regular files names (relative to dir) out of a
// container in one tar stream made inside it, calling fn for each in turn.
// tar stores symbolic links as links, never following them; they and any
// other non-regular entry are not passed to fn. (docker cp cannot be used:
// it does not see tmpfs mounts, and /session is one in TMPFS mode.)
func (d Driver) ReadFiles(ctx context.Context, id, user, dir string, names []string, fn func(name string, r io.Reader) error) error {
	cmd := []string{"tar", "-C", dir, "--null", "--verbatim-files-from", "--no-recursion", "-T", "-", "-cf", "-"}
	s, err := d.cli.Exec(ctx, id, user, cmd)
	if err != nil {
		return driverError(err)
	}
	defer s.Close()
	go func() {
		var list []byte
		for _, n := range names {
			list = append(append(list, n...), 0)
		}
		s.Write(list)
		s.CloseWrite()
	}()
	tr := tar.NewReader(s)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read files from container %s: %w (tar said: %s)", short(id), err, s.Stderr())
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if err := fn(hdr.Name, tr); err != nil {
			return err
		}
	}
	return nil
}

// HostRoot returns the container's root filesystem as this host sees it,
// /proc/<pid>/root, when the engine runs on this host and this process may
// look there; "" otherwise. Reading a tmpfs /session there is as fast as a
// local disk, where the engine's exec stream carries about 100 MiB/s.
func (d Driver) HostRoot(ctx context.Context, id string) string {
	if !strings.HasPrefix(d.cli.Host(), "unix://") {
		return ""
	}
	st, err := d.cli.InspectContainer(ctx, id)
	if err != nil || st.Pid <= 0 {
		return ""
	}
	root := fmt.Sprintf("/proc/%d/root", st.Pid)
	if !SameContainer(root, st.ID) {
		return ""
	}
	return root
}

// SameContainer reports whether the process behind a /proc/<pid>/root path
// still belongs to container id (a pid may be reused once it exits), and
// whether this process may read its files. HostRoot checks it before
// naming a root, and session checks it again before each use of one it
// kept.
func SameContainer(root, id string) bool {
	cg, err := os.ReadFile(filepath.Join(filepath.Dir(root), "cgroup"))
	if err != nil || !strings.Contains(string(cg), id) {
		return false
	}
	_, err = os.Stat(filepath.Join(root, "session"))
	return err == nil
}

// WriteFile writes r into a container at path (its folder created if
// needed), as user (the sandbox's), through a temporary name so that code
// never sees half a file. The temporary file has a random name made by
// mktemp (O_EXCL) and dd opens it with nofollow,nonblock: a FIFO or a link
// the code planted at a fixed name held the write (and the caller's turn)
// forever. mv -T never moves the file into a folder planted at path.
func (d Driver) WriteFile(ctx context.Context, id, user, path string, r io.Reader) error {
	script := `d=$(dirname "$1") && mkdir -p "$d" && t=$(mktemp "$d/.stage.XXXXXXXXXX") && ` +
		`{ dd of="$t" oflag=nofollow,nonblock conv=notrunc bs=1M status=none && mv -fT "$t" "$1" || { rm -f "$t"; exit 1; }; }`
	s, err := d.cli.Exec(ctx, id, user, []string{"sh", "-c", script, "sh", path})
	if err != nil {
		return driverError(err)
	}
	defer s.Close()
	if _, err := io.Copy(s, r); err != nil {
		return fmt.Errorf("write %s in container %s: %w", path, short(id), err)
	}
	s.CloseWrite()
	io.Copy(io.Discard, s)
	if msg := s.Stderr(); msg != "" {
		return fmt.Errorf("write %s in container %s: %s", path, short(id), strings.TrimSpace(msg))
	}
	return nil
}

// RunCommand runs cmd in a container as user, stdin its standard input,
// and returns the first maxOut bytes of its standard output; when it wrote
// nothing there, what it wrote to standard error is the error. The stream
// is closed when ctx ends, so a process that hangs holds nobody.
func (d Driver) RunCommand(ctx context.Context, id, user string, cmd []string, stdin io.Reader, maxOut int) ([]byte, error) {
	s, err := d.cli.Exec(ctx, id, user, cmd)
	if err != nil {
		return nil, driverError(err)
	}
	var once sync.Once
	closeStream := func() { once.Do(func() { s.Close() }) }
	defer closeStream()
	stop := context.AfterFunc(ctx, closeStream)
	defer stop()
	go func() {
		io.Copy(s, stdin)
		s.CloseWrite()
	}()
	out, err := io.ReadAll(io.LimitReader(s, int64(maxOut)))
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("run %s in container %s: %w", cmd[0], short(id), context.Cause(ctx))
	case err != nil:
		return nil, fmt.Errorf("run %s in container %s: %w", cmd[0], short(id), err)
	case len(out) == 0 && strings.TrimSpace(s.Stderr()) != "":
		return nil, fmt.Errorf("run %s in container %s: %s", cmd[0], short(id), strings.TrimSpace(s.Stderr()))
	}
	return out, nil
}

// RemoveFile deletes one file in a container, as user (the sandbox's).
func (d Driver) RemoveFile(ctx context.Context, id, user, path string) error {
	s, err := d.cli.Exec(ctx, id, user, []string{"rm", "-f", "--", path})
	if err != nil {
		return driverError(err)
	}
	defer s.Close()
	if _, err := io.Copy(io.Discard, s); err != nil {
		return fmt.Errorf("remove %s in container %s: %w", path, short(id), err)
	}
	if msg := s.Stderr(); msg != "" {
		return fmt.Errorf("remove %s in container %s: %s", path, short(id), msg)
	}
	return nil
}

func (d Driver) MemoryUsage(ctx context.Context, id string) (int64, error) {
	n, err := d.cli.MemoryUsage(ctx, id)
	return n, driverError(err)
}

func driverContainer(st ContainerState) driver.Container {
	return driver.Container{
		ID:        st.ID,
		Name:      st.Name,
		Image:     st.Image,
		Labels:    st.Labels,
		Running:   st.Running,
		Paused:    st.Paused,
		Status:    st.Status,
		ExitCode:  st.ExitCode,
		OOMKilled: st.OOMKilled,
		Pid:       st.Pid,
		Created:   st.Created,
	}
}

// StreamCommand starts cmd in container id as user, joined to a stream.
func (d Driver) StreamCommand(ctx context.Context, id, user string, cmd []string) (driver.Stream, error) {
	s, err := d.cli.Exec(ctx, id, user, cmd)
	if errors.Is(err, ErrConflict) {
		// The engine's answer for a container that is not running.
		return nil, fmt.Errorf("exec in container %s: not running: %w", short(id), err)
	}
	if err != nil {
		return nil, driverError(err)
	}
	return s, nil
}

// ExecStream starts cmd in container id as user. A paused container is
// driver.ErrPaused, a stopped or missing one driver.ErrSessionLost: the
// engine answers both with a conflict, which is not a name in use here.
func (d Driver) ExecStream(ctx context.Context, id, user string, cmd []string) (driver.Stream, error) {
	s, err := d.cli.Exec(ctx, id, user, cmd)
	if err == nil {
		return s, nil
	}
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
		st, ierr := d.cli.InspectContainer(ctx, id)
		switch {
		case errors.Is(ierr, ErrNotFound) || errors.Is(err, ErrNotFound):
			return nil, fmt.Errorf("%w: container %s was removed", driver.ErrSessionLost, short(id))
		case ierr == nil && st.Status == "paused":
			return nil, fmt.Errorf("%w: container %s is paused", driver.ErrPaused, short(id))
		case ierr == nil && !st.Running:
			return nil, fmt.Errorf("%w: container %s is not running (%s)", driver.ErrSessionLost, short(id), st.Status)
		}
	}
	return nil, driverError(err)
}

// Pause freezes a running container; a conflict (not running, already
// paused) stays the engine's error.
func (d Driver) Pause(ctx context.Context, id string) error {
	return freeze(ctx, freezeDelay, func(ctx context.Context) error {
		return driverStateError(d.cli.PauseContainer(ctx, id))
	})
}

// freezeAttempts is how often Pause asks the engine to pause a container
// whose freezer gave up; freezeDelay is the first wait between attempts
// (doubled after each).
const (
	freezeAttempts = 4
	freezeDelay    = 250 * time.Millisecond
)

// freeze calls pause, trying again (after delay, twice it, four times it)
// when the engine's freezer gave up: runc's cgroup v1 freezer fails now
// and then while processes fork in the container on a loaded machine,
// thaws it and reports "unable to freeze", and a new attempt usually
// succeeds. That is this engine's message, which is why the retry lives
// in this driver. Other errors are returned at once.
func freeze(ctx context.Context, delay time.Duration, pause func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := pause(ctx)
		if err == nil || attempt == freezeAttempts || !strings.Contains(err.Error(), "unable to freeze") {
			return err
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
		delay *= 2
	}
}

// Unpause thaws a paused container; a conflict (not paused) stays the
// engine's error.
func (d Driver) Unpause(ctx context.Context, id string) error {
	return driverStateError(d.cli.UnpauseContainer(ctx, id))
}

// driverStateError is driverError for calls whose conflict means a
// container in the wrong state, not a taken name.
func driverStateError(err error) error {
	if errors.Is(err, ErrConflict) {
		return err
	}
	return driverError(err)
}
