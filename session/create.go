package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// create starts a container for e, from the warm pool when it has one.
func (m *Manager) create(ctx context.Context, e *entry) (err error) {
	ctx, span := m.startSpan(ctx, SpanCreate, e.key)
	defer func() { endSpan(span, err) }()
	// A warm container has the defaults: a session asking for other
	// options gets a container of its own.
	if p := m.warm(e); p != nil {
		actx, aspan := m.startSpan(ctx, SpanPoolAcquire, e.key, AttrContainerID.String(p.id))
		t0 := time.Now()
		err := m.adopt(actx, e, p)
		endSpan(aspan, err)
		m.pool.signal()
		if err == nil {
			m.metrics.poolTaken(true, time.Since(t0))
			span.SetAttributes(AttrPoolHit.Bool(true))
			return nil
		}
		if errors.Is(err, ErrNameInUse) {
			return err
		}
		m.log.Warn("warm container unusable, starting a new one", "container_id", shortID(p.id), "err", err)
	}
	var dir string
	if m.cfg.SessionStorage == config.StorageBind {
		var err error
		if dir, err = m.makeSessionDir(e.id); err != nil {
			return err
		}
	}
	m.metrics.poolTaken(false, 0)
	span.SetAttributes(AttrPoolHit.Bool(false))
	spec := m.spec(m.containerName(e.id), RoleSession, dir)
	spec.Labels[LabelKey] = labelKey(e.key)
	m.applyCreation(&spec, e.cr, time.Now())
	t0 := time.Now()
	cctx, cspan := m.startSpan(ctx, SpanContainer, e.key)
	// Not cancelled by the caller: an engine call abandoned mid-way may
	// make the container after a removal by name found nothing. A caller
	// gone meanwhile has it removed below.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(cctx), startTimeout)
	id, err := m.createOnDisk(cctx, e.id, spec)
	ccancel()
	endSpan(cspan, err)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			// Timed out mid-call, the engine may have made it all the
			// same: remove it by name rather than leave it behind.
			m.removeBestEffort(spec.Name)
		}
		return err
	}
	if err := ctx.Err(); err != nil {
		m.removeBestEffort(id)
		return err
	}
	kctx, kspan := m.startSpan(ctx, SpanKernelReady, e.key, AttrContainerID.String(id))
	client, err := m.dial(kctx, id)
	endSpan(kspan, err)
	if err != nil {
		if rmErr := m.drv.Remove(context.WithoutCancel(ctx), id); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
		return err
	}
	m.metrics.coldStarted("session", time.Since(t0))
	e.containerID, e.client = id, client
	m.streamUp(e)
	m.baseline(ctx, e, dir != "")
	e.created = time.Now()
	m.touch(e, e.created)
	return m.recordNew(ctx, e)
}

// recordNew records a session this process just started. A session that
// cannot be recorded is not left running unknown to every manager: its
// container goes, and the caller hears why.
func (m *Manager) recordNew(ctx context.Context, e *entry) error {
	err := m.record(ctx, e)
	if err == nil {
		return nil
	}
	e.client.Close()
	e.client = nil
	if rmErr := m.drv.Remove(context.WithoutCancel(ctx), e.containerID); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	return err
}

// labelKey keeps a key in a label only if it is printable and short; the
// history database holds every key.
func labelKey(key string) string {
	if len(key) > 256 || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xfffd }) {
		return ""
	}
	return key
}

// adopt hands a warm container to e: it is renamed to the key's name, and in
// BIND mode its folder becomes the key's folder.
func (m *Manager) adopt(ctx context.Context, e *entry, p *pooled) error {
	name := m.containerName(e.id)
	if err := m.drv.Rename(ctx, p.id, name); err != nil {
		// Another process made this key's container first: ours goes back
		// to being unused, and is removed.
		m.removeBestEffort(p.id)
		p.client.Close()
		return err
	}
	if m.cfg.SessionStorage == config.StorageBind {
		claim := m.claimDir
		if m.diskLimited() {
			claim = m.claimDisk
		}
		if err := claim(p.dir, e.id); err != nil {
			m.removeBestEffort(p.id)
			p.client.Close()
			return err
		}
	}
	e.containerID, e.client = p.id, p.client
	m.streamUp(e)
	m.baseline(ctx, e, m.cfg.SessionStorage == config.StorageBind)
	e.created = time.Now()
	m.touch(e, e.created)
	return m.recordNew(ctx, e)
}

// claimDir gives a warm container's workspace (of the folder src) to the
// session folder dst, both relative to SESSIONS_ROOT. The bind mount
// follows the workspace when it is renamed. An earlier session of the same
// key keeps its records in dst, and the files it left in its workspace are
// moved into the warm one first, as if it had been mounted.
func (m *Manager) claimDir(src, dst string) error {
	if _, err := m.makeSessionDir(dst); err != nil {
		return err
	}
	root, err := os.OpenRoot(m.cfg.SessionsRoot)
	if err != nil {
		return fmt.Errorf("session folder: %w", err)
	}
	defer root.Close()
	from, to := path.Join(dst, WorkspaceDir), path.Join(src, WorkspaceDir)
	f, err := root.Open(from)
	if err != nil {
		return fmt.Errorf("session folder: %w", err)
	}
	old, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("session folder: %w", err)
	}
	// The warm workspace holds only the empty folders its init made
	// (artifacts, data, app, workspace): the key's entries of those names
	// take their place. A rename cannot replace them (renameat: file
	// exists), and one failing midway would leave the entries moved before
	// it in a workspace that is then dropped: every name is made free
	// before anything moves.
	for _, d := range old {
		if err := root.Remove(path.Join(to, d.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("session folder: %w", err)
		}
	}
	for _, d := range old {
		// Renames move links as links, never through them.
		if err := root.Rename(path.Join(from, d.Name()), path.Join(to, d.Name())); err != nil {
			return fmt.Errorf("session folder: %w", err)
		}
	}
	if err := root.Remove(from); err != nil {
		return fmt.Errorf("session folder: %w", err)
	}
	if err := root.Rename(to, from); err != nil {
		return fmt.Errorf("session folder: %w", err)
	}
	if err := root.RemoveAll(src); err != nil {
		m.log.Warn("remove warm container folder", "dir", filepath.Join(m.cfg.SessionsRoot, src), "err", err)
	}
	return nil
}

func (m *Manager) removeBestEffort(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.drv.Remove(ctx, id); err != nil {
		m.log.Warn("remove container", "container_id", shortID(id), "err", err)
	}
}

// retireWait is how long a lost session's call waits for its container to
// be removed before leaving the rest to the background.
const retireWait = 3 * time.Second

// retire removes the container id of a lost session without
// making the caller wait on a runtime that does not answer: under gVisor a
// stopped sandbox (its kernel is one host process) holds `docker rm -f`
// until it runs again, while a rename is the engine's own business and
// instant. So the container first gives up the session's name (the next
// call creates a fresh one under it), then is removed, in the background
// past retireWait. Close abandons a removal still waiting; the container
// keeps its labels, so the idle sweep of any manager removes it later.
func (m *Manager) retire(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), retireWait)
	defer cancel()
	if err := m.drv.Rename(ctx, id, m.ns+"_lost-"+id); err != nil && !errors.Is(err, ErrContainerNotFound) {
		m.log.Warn("rename a lost container", "container_id", shortID(id), "err", err)
	}
	done := make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(done)
		ctx, cancel := context.WithTimeout(m.bg, 2*time.Minute)
		defer cancel()
		if err := m.drv.Remove(ctx, id); err != nil {
			m.log.Warn("remove a lost container", "container_id", shortID(id), "err", err)
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		m.log.Warn("a lost container is slow to go; removing it in the background", "container_id", shortID(id))
	}
}

// createContainer creates and starts a container from spec. The init asks
// for oom_score_adj -1000, which an engine without CAP_SYS_RESOURCE (rootless,
// or itself in a container) cannot grant: the runtime fails to start the
// container at all (ErrContainerStart). Then, if a container without it
// starts, containers are made without it for the Manager's lifetime, with a
// warning: the kernel worker raises its own score
// to 1000 all the same, so the OOM killer takes it and what it runs before
// the init, unless code lowers its own score back to the init's.
func (m *Manager) createContainer(ctx context.Context, spec Spec) (string, error) {
	// Not the caller's cancellation: a read cut short is not tried
	// again, and the engine would be asked at the cost of a failed start.
	m.oomAdjRead.Do(func() { m.readOOMAdjFact(context.WithoutCancel(ctx)) })
	if m.oomAdjRefused.Load() {
		spec.OomScoreAdj = 0
	}
	id, err := m.drv.Create(ctx, spec)
	if err == nil || spec.OomScoreAdj >= 0 || ctx.Err() != nil || !errors.Is(err, ErrContainerStart) {
		return id, err
	}
	spec.OomScoreAdj = 0
	id, err2 := m.drv.Create(ctx, spec)
	if errors.Is(err2, ErrNameInUse) {
		// Another process made this name meanwhile (the failed first
		// container was removed): the caller waits for that one.
		return "", err2
	}
	if err2 != nil {
		return "", err // the first cause, not the fallback's
	}
	if !m.oomAdjRefused.Swap(true) {
		m.log.Warn("the engine cannot give the init oom_score_adj -1000; sandboxes start without it (the kernel worker's 1000 still makes it the OOM killer's choice)", "err", err)
		if err := m.store.SetFact(context.WithoutCancel(ctx), factOOMAdjRefused, "refused", time.Now()); err != nil {
			m.log.Warn("record that the engine refuses oom_score_adj -1000", "err", err)
		}
	}
	return id, nil
}

// factOOMAdjRefused is the engine fact of an engine that refused the
// init's oom_score_adj -1000; oomAdjFactFresh how long a Manager takes it
// as known without asking the engine again. So only the first Manager of
// a day pays a failed start (half a second on a VM), not every agentbox
// command and server start; an engine given the right meanwhile gets
// -1000 again within a day.
const (
	factOOMAdjRefused = "oom_score_adj_refused"
	oomAdjFactFresh   = 24 * time.Hour
)

// readOOMAdjFact takes a recent refusal another Manager recorded.
func (m *Manager) readOOMAdjFact(ctx context.Context) {
	_, at, err := m.store.Fact(ctx, factOOMAdjRefused)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			m.log.Warn("read whether the engine refuses oom_score_adj -1000; asking it", "err", err)
		}
		return
	}
	if age := time.Since(at); age >= 0 && age < oomAdjFactFresh {
		m.oomAdjRefused.Store(true)
		m.log.Warn("the engine cannot give the init oom_score_adj -1000 (a Manager found so at " + at.UTC().Format(time.RFC3339) + "); sandboxes start without it (the kernel worker's 1000 still makes it the OOM killer's choice)")
	}
}

// numericUser parses "uid" or "uid:gid".
func numericUser(u string) (uid, gid int, ok bool) {
	us, gs, hasGID := strings.Cut(u, ":")
	uid, err := strconv.Atoi(us)
	if err != nil {
		return 0, 0, false
	}
	gid = uid
	if hasGID {
		if gid, err = strconv.Atoi(gs); err != nil {
			return 0, 0, false
		}
	}
	return uid, gid, true
}

// spec is the container of a session (or of the warm pool), with every
// setting from the configuration. dir is the BIND folder, empty in TMPFS mode.
func (m *Manager) spec(name, role, dir string) Spec {
	cfg := m.cfg
	owner := "mode=1777"
	if uid, gid, ok := numericUser(cfg.User); ok {
		owner = fmt.Sprintf("uid=%d,gid=%d,mode=0700", uid, gid)
	}
	s := Spec{
		Name:  name,
		Image: cfg.SandboxImage,
		// The init runs as root with four capabilities and starts the
		// kernel as cfg.User with none (see sandboximage.InitUser).
		User:       sandboximage.InitUser,
		WorkingDir: "/",
		Labels:     m.labels(role),
		Network:    cfg.Network,
		Env: []string{
			sandboximage.UserEnv + "=" + cfg.User,
			"AGENTBOX_MAX_OUTPUT=" + strconv.Itoa(cfg.MaxOutputBytes),
			"AGENTBOX_INTERRUPT_GRACE=" + strconv.FormatFloat(cfg.InterruptGrace.Seconds(), 'f', -1, 64),
			// The init's memory watchdog keeps the processes under it (gVisor
			// has no OOM killer of its own); files in memory are counted
			// apart, up to AGENTBOX_FILES_MEMORY (see containerMemory).
			"AGENTBOX_MEMORY_LIMIT=" + strconv.FormatInt(int64(cfg.MemoryMB)<<20, 10),
			"AGENTBOX_FILES_MEMORY=" + strconv.FormatInt(m.filesMemory(), 10),
		},
		ReadOnlyRoot:    cfg.ReadOnlyRoot,
		Tmpfs:           map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%dm,mode=1777", tmpSizeMB)},
		MemoryBytes:     m.containerMemory(cfg.MemoryMB),
		ShmBytes:        shmSizeMB << 20,
		OomScoreAdj:     -1000, // the init holds the session; the worker raises its own back
		NoSwap:          true,
		NanoCPUs:        int64(cfg.CPUs * 1e9),
		PidsLimit:       int64(cfg.PidsLimit),
		CapDropAll:      true,
		CapAdd:          sandboximage.InitCapabilities(),
		NoNewPrivileges: true,
		Seccomp:         cfg.SeccompProfile(sandboximage.SeccompProfile()),
		Runtime:         cfg.Runtime,
	}
	for _, name := range cfg.EnvPassthrough {
		if v, ok := m.lookup(name); ok {
			s.Env = append(s.Env, name+"="+v)
		}
	}
	if dir != "" {
		s.Mounts = append(s.Mounts, Mount{Source: dir, Target: "/session"})
	} else {
		s.Tmpfs["/session"] = fmt.Sprintf("rw,nosuid,nodev,size=%dm,%s", cfg.TmpfsSizeMB, owner)
	}
	if cfg.DatasetAccess.UsesLocal() {
		s.Mounts = append(s.Mounts, Mount{Source: cfg.DatasetsHostRO, Target: "/data", ReadOnly: true})
	}
	return s
}

// Sizes of the container's other file systems in memory.
const (
	tmpSizeMB = 256 // /tmp
	shmSizeMB = 64  // /dev/shm, the engine's default made explicit
)

// filesMemory is what files in memory may take in a session container, in
// bytes: /tmp, /dev/shm, and /session in TMPFS mode, each at its full size.
func (m *Manager) filesMemory() int64 {
	mb := int64(tmpSizeMB + shmSizeMB)
	if m.cfg.SessionStorage != config.StorageBind {
		mb += int64(m.cfg.TmpfsSizeMB)
	}
	return mb << 20
}

// containerMemory is the container's memory limit for processes that may use
// memoryMB: that plus every file system in memory at its full size. Pages of
// tmpfs files count against a container's memory limit, and they cannot be
// reclaimed or swapped: under one limit shared by both, a full /session left
// the processes no memory (every execution died as OutOfMemory) or made the
// kernel's OOM killer end the container with /session in it. Counted apart,
// the files stop at their size (ENOSPC) and the processes keep SANDBOX_MEMORY_MB,
// which the init's watchdog holds them to; the engine's limit stays the
// backstop of the sum. The alternative, refusing a TMPFS_SIZE_MB that leaves
// no headroom under SANDBOX_MEMORY_MB, would refuse the default (1024 MiB each)
// and still let files starve the processes of what headroom is left.
func (m *Manager) containerMemory(memoryMB int) int64 {
	return int64(memoryMB)<<20 + m.filesMemory()
}

// limits are the session's limits as session_metadata.json shows them.
func (m *Manager) limits() map[string]string {
	cfg := m.cfg
	return map[string]string{
		"memory_mb":      strconv.Itoa(cfg.MemoryMB),
		"cpus":           strconv.FormatFloat(cfg.CPUs, 'f', -1, 64),
		"pids":           strconv.Itoa(cfg.PidsLimit),
		"network":        cfg.Network,
		"user":           cfg.User,
		"read_only_root": strconv.FormatBool(cfg.ReadOnlyRoot),
		"runtime":        cfg.Runtime,
		"tmpfs_size_mb":  strconv.Itoa(cfg.TmpfsSizeMB),
		"exec_timeout_s": strconv.Itoa(int(cfg.ExecTimeout.Seconds())),
		"max_output":     strconv.Itoa(cfg.MaxOutputBytes),
	}
}
