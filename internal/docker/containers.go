package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
)

// Mount is a host folder mounted into a container.
type Mount struct {
	Source   string // absolute host path
	Target   string // path in the container
	ReadOnly bool
}

// ContainerSpec describes a container to create. Every security-relevant field
// is explicit so that callers choose, and nothing is weakened by a default here.
type ContainerSpec struct {
	Name            string
	Image           string
	Entrypoint      []string // nil: the image's
	Cmd             []string
	Env             []string
	User            string
	WorkingDir      string
	Labels          map[string]string
	NetworkMode     string            // "none", "bridge", ...
	ReadOnlyRoot    bool              // read-only root filesystem
	Tmpfs           map[string]string // path -> mount options ("rw,size=64m,uid=1000")
	Mounts          []Mount
	MemoryBytes     int64 // 0 = unlimited
	NoSwap          bool  // memory+swap = memory
	ShmBytes        int64 // size of /dev/shm; 0 = the engine's default (64 MiB)
	OomScoreAdj     int   // of the first process, -1000 to 1000
	NanoCPUs        int64 // 1e9 = one core; 0 = unlimited
	PidsLimit       int64 // 0 = unlimited
	CapDropAll      bool
	CapAdd          []string // capabilities given back after CapDropAll ("SETUID", ...)
	NoNewPrivileges bool
	// Seccomp is the seccomp profile as JSON; "" keeps the engine's
	// default, "unconfined" turns seccomp off.
	Seccomp string
	Runtime string // OCI runtime name; "" = engine default
}

// CreateContainer creates and starts a container. A container that was created
// but could not start is removed before the error is returned.
func (c *Client) CreateContainer(ctx context.Context, spec ContainerSpec) (string, error) {
	cfg := &container.Config{
		Image:      spec.Image,
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Cmd,
		Env:        spec.Env,
		User:       spec.User,
		WorkingDir: spec.WorkingDir,
		Labels:     spec.Labels,
	}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(spec.NetworkMode),
		ReadonlyRootfs: spec.ReadOnlyRoot,
		Tmpfs:          spec.Tmpfs,
		Runtime:        spec.Runtime,
		ShmSize:        spec.ShmBytes,
		OomScoreAdj:    spec.OomScoreAdj,
		Resources: container.Resources{
			Memory:   spec.MemoryBytes,
			NanoCPUs: spec.NanoCPUs,
		},
	}
	if spec.NoSwap && spec.MemoryBytes > 0 {
		host.Resources.MemorySwap = spec.MemoryBytes
	}
	if spec.PidsLimit > 0 {
		limit := spec.PidsLimit
		host.Resources.PidsLimit = &limit
	}
	if spec.CapDropAll {
		host.CapDrop = []string{"ALL"}
	}
	host.CapAdd = spec.CapAdd
	if spec.NoNewPrivileges {
		host.SecurityOpt = append(host.SecurityOpt, "no-new-privileges:true")
	}
	if spec.Seccomp != "" {
		// The API takes the profile itself, not a file name (the docker
		// command reads the file and sends its content).
		host.SecurityOpt = append(host.SecurityOpt, "seccomp="+spec.Seccomp)
	}
	for _, m := range spec.Mounts {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	resp, err := c.api.ContainerCreate(ctx, cfg, host, &network.NetworkingConfig{}, nil, spec.Name)
	if err != nil {
		return "", fmt.Errorf("create container from %s: %w", spec.Image, c.classify(err))
	}
	if err := c.api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		rmErr := c.RemoveContainer(context.WithoutCancel(ctx), resp.ID)
		err = c.classify(err)
		if !errors.Is(err, ErrUnreachable) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", ErrStart, err)
		}
		return "", errors.Join(fmt.Errorf("start container %s: %w", short(resp.ID), err), rmErr)
	}
	return resp.ID, nil
}

// RemoveContainer kills and removes a container with its anonymous volumes.
// A container that is already gone counts as removed; one that another
// caller is removing is waited for (up to removeWait, removing it again
// should that removal fail), so that a nil error always means the engine
// no longer shows it: while a removal runs, the engine shows the container
// exited (137), not "removing".
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	err := c.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err == nil || errors.Is(c.classify(err), ErrNotFound) {
		return nil
	}
	inspect, ierr := c.api.ContainerInspect(ctx, id)
	if ierr != nil && errors.Is(c.classify(ierr), ErrNotFound) {
		return nil
	}
	inProgress := strings.Contains(err.Error(), "already in progress") ||
		(ierr == nil && inspect.State != nil && inspect.State.Status == "removing")
	if !inProgress {
		// A container frozen while the engine killed it (a pause racing
		// the removal) never sees the signal ("did not receive an exit
		// event"): thaw it and remove it again. A pause or kill still
		// under way (cgroup v1 freezes slowly under load) can refuse the
		// removal for a moment too: try again a few times, a little later.
		for delay := 50 * time.Millisecond; delay <= 800*time.Millisecond; delay *= 2 {
			if ierr != nil || inspect.State == nil {
				break
			}
			if inspect.State.Paused || inspect.State.Running {
				_ = c.api.ContainerUnpause(ctx, id) // refused when not paused: no matter
			}
			err = c.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			if err == nil || errors.Is(c.classify(err), ErrNotFound) {
				return nil
			}
			if strings.Contains(err.Error(), "already in progress") {
				break
			}
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return fmt.Errorf("remove container %s: %w", short(id), c.classify(err))
			}
			inspect, ierr = c.api.ContainerInspect(ctx, id)
			if ierr != nil && errors.Is(c.classify(ierr), ErrNotFound) {
				return nil
			}
		}
		if !strings.Contains(err.Error(), "already in progress") {
			return fmt.Errorf("remove container %s: %w", short(id), c.classify(err))
		}
	}
	wctx, cancel := context.WithTimeout(ctx, removeWait)
	defer cancel()
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 250*time.Millisecond) {
		select {
		case <-time.After(delay):
		case <-wctx.Done():
			return fmt.Errorf("remove container %s: another removal did not end within %s: %w", short(id), removeWait, c.classify(err))
		}
		// Again, not only a look: the other removal may have failed.
		err = c.api.ContainerRemove(wctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil || errors.Is(c.classify(err), ErrNotFound):
			return nil
		case !strings.Contains(err.Error(), "already in progress") && wctx.Err() == nil:
			return fmt.Errorf("remove container %s: %w", short(id), c.classify(err))
		}
	}
}

// removeWait bounds how long RemoveContainer waits for another caller's
// removal of the same container.
const removeWait = 30 * time.Second

// KillContainer sends signal (e.g. "KILL") to the container's PID 1.
func (c *Client) KillContainer(ctx context.Context, id, signal string) error {
	if err := c.api.ContainerKill(ctx, id, signal); err != nil {
		return fmt.Errorf("kill container %s: %w", short(id), c.classify(err))
	}
	return nil
}

// ContainerState is what agentbox needs to know of a container.
type ContainerState struct {
	ID        string
	Name      string
	Image     string // image ID
	Labels    map[string]string
	Running   bool // also while paused, as the engine says
	Paused    bool // frozen (docker pause)
	Status    string
	ExitCode  int
	OOMKilled bool
	Pid       int // of its first process, on the engine's host; 0 when not running
	Created   time.Time
	StartedAt time.Time
}

// InspectContainer returns the state of a container; ErrNotFound if it is gone.
func (c *Client) InspectContainer(ctx context.Context, id string) (ContainerState, error) {
	resp, err := c.api.ContainerInspect(ctx, id)
	if err != nil {
		return ContainerState{}, fmt.Errorf("inspect container %s: %w", short(id), c.classify(err))
	}
	st := ContainerState{ID: resp.ID, Name: strings.TrimPrefix(resp.Name, "/"), Image: resp.Image}
	st.Created, _ = time.Parse(time.RFC3339Nano, resp.Created)
	if resp.Config != nil {
		st.Labels = resp.Config.Labels
	}
	if resp.State != nil {
		st.Running = resp.State.Running
		st.Paused = resp.State.Paused
		st.Status = resp.State.Status
		st.ExitCode = resp.State.ExitCode
		st.OOMKilled = resp.State.OOMKilled
		st.Pid = resp.State.Pid
		st.StartedAt, _ = time.Parse(time.RFC3339Nano, resp.State.StartedAt)
	}
	return st, nil
}

// ListContainers returns the containers (running or not) carrying every label
// in labels ("key=value" or "key").
func (c *Client) ListContainers(ctx context.Context, labels ...string) ([]ContainerState, error) {
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := c.api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", c.classify(err))
	}
	out := make([]ContainerState, 0, len(list))
	for _, s := range list {
		st := ContainerState{ID: s.ID, Image: s.ImageID, Labels: s.Labels, Running: s.State == "running" || s.State == "paused", Paused: s.State == "paused", Status: s.State, Created: time.Unix(s.Created, 0)}
		if len(s.Names) > 0 {
			st.Name = strings.TrimPrefix(s.Names[0], "/")
		}
		out = append(out, st)
	}
	return out, nil
}

// RenameContainer gives container id a new name; ErrConflict if the name is
// taken.
func (c *Client) RenameContainer(ctx context.Context, id, name string) error {
	if err := c.api.ContainerRename(ctx, id, name); err != nil {
		return fmt.Errorf("rename container %s to %s: %w", short(id), name, c.classify(err))
	}
	return nil
}

// MemoryUsage returns the memory a running container uses now, in bytes, as
// `docker stats` counts it (page cache that can be reclaimed excluded).
func (c *Client) MemoryUsage(ctx context.Context, id string) (int64, error) {
	resp, err := c.api.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("stats of container %s: %w", short(id), c.classify(err))
	}
	defer resp.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("stats of container %s: %w", short(id), err)
	}
	used := int64(st.MemoryStats.Usage)
	// cgroup v1 reports cache under total_inactive_file, v2 under
	// inactive_file; docker stats subtracts it, and so do we.
	for _, k := range []string{"total_inactive_file", "inactive_file"} {
		if v, ok := st.MemoryStats.Stats[k]; ok && int64(v) < used {
			used -= int64(v)
			break
		}
	}
	return used, nil
}

// CopyFrom returns a tar stream of path in container id (a file, or a
// folder with everything under it), as `docker cp` reads it.
func (c *Client) CopyFrom(ctx context.Context, id, path string) (io.ReadCloser, error) {
	rc, _, err := c.api.CopyFromContainer(ctx, id, path)
	if err != nil {
		return nil, fmt.Errorf("copy %s from container %s: %w", path, short(id), c.classify(err))
	}
	return rc, nil
}

// Logs returns what the container wrote to its stdout and stderr.
func (c *Client) Logs(ctx context.Context, id string) (stdout, stderr string, err error) {
	rc, err := c.api.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", "", fmt.Errorf("logs of container %s: %w", short(id), c.classify(err))
	}
	defer rc.Close()
	var out, errb limitedBuffer
	out.max, errb.max = 1<<20, 1<<20
	if _, err := stdcopy.StdCopy(&out, &errb, rc); err != nil && !errors.Is(err, io.EOF) {
		return out.String(), errb.String(), fmt.Errorf("logs of container %s: %w", short(id), err)
	}
	return out.String(), errb.String(), nil
}

// Wait blocks until the container stops and returns its exit code. The
// engine's wait call is re-armed every few seconds with a look at the
// container's state in between, because a loaded engine has been seen to
// miss a container's exit and leave the call hanging until the deadline.
func (c *Client) Wait(ctx context.Context, id string) (int64, error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		okc, errc := c.api.ContainerWait(wctx, id, container.WaitConditionNotRunning)
		select {
		case ok := <-okc:
			cancel()
			if ok.Error != nil {
				return ok.StatusCode, fmt.Errorf("wait for container %s: %s", short(id), ok.Error.Message)
			}
			return ok.StatusCode, nil
		case err := <-errc:
			cancel()
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
				return -1, fmt.Errorf("wait for container %s: %w", short(id), c.classify(err))
			}
		}
		st, err := c.InspectContainer(ctx, id)
		if err != nil {
			return -1, fmt.Errorf("wait for container %s: %w", short(id), err)
		}
		if !st.Running && st.Status != "created" {
			return int64(st.ExitCode), nil
		}
	}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	buf []byte
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - len(b.buf); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		b.buf = append(b.buf, p[:room]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string { return string(b.buf) }
