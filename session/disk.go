package session

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/config"
)

// A BIND session's workspace is, when SESSION_DISK_MB is set, a file system
// of its own: an ext4 image (DiskImage) in the session's records folder,
// allocated in full when made (so sessions never overcommit the host's disk
// and the reserve check is exact), loop-mounted on the host at the
// workspace before the container starts. The kernel then answers a write
// past the limit with ENOSPC inside the sandbox; nothing polls. The mount
// uses a loop device with autoclear: the device goes when its last mount
// does, the host's (unmounted when the session ends) and the container's
// (gone with the container). The image stays, as BIND promises files do,
// and is mounted again by the key's next session.
//
// A per-folder lock (diskLock) orders a mount and the container create that
// uses it against a release, in this process and in others sharing
// SESSIONS_ROOT: a release only unmounts a workspace no container of the
// session's name holds.

// DiskImage is the file, beside a BIND session's records, holding the file
// system mounted as its workspace when SESSION_DISK_MB is set.
const DiskImage = "workspace.img"

// diskLock is the lock file of a session folder's disk.
const diskLock = "disk.lock"

// diskLimited reports whether BIND workspaces are file systems of their own.
func (m *Manager) diskLimited() bool {
	return m.cfg.SessionStorage == config.StorageBind && m.cfg.SessionDiskMB > 0
}

// lockDisk takes the lock of session folder name's disk: closing the
// returned file releases it. The file holds the namespace of the manager
// that last mounted the disk (see ownDisk), so a sweep leaves alone the
// disks of another namespace sharing SESSIONS_ROOT.
func (m *Manager) lockDisk(name string) (*os.File, error) {
	d, err := openDir(filepath.Join(m.cfg.SessionsRoot, name))
	if err != nil {
		return nil, fmt.Errorf("session disk %s: %w", name, err)
	}
	defer d.Close()
	f, err := openAt(d, diskLock, syscall.O_RDWR|syscall.O_CREAT, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session disk %s: %w", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("session disk %s: lock: %w", name, err)
	}
	return f, nil
}

// ownDisk records in the lock file lock that this manager's namespace
// mounted the disk.
func (m *Manager) ownDisk(lock *os.File) error {
	if err := lock.Truncate(0); err != nil {
		return err
	}
	_, err := lock.WriteAt([]byte(m.ns), 0)
	return err
}

// ownsDisk reports whether lock records this manager's namespace.
func (m *Manager) ownsDisk(lock *os.File) bool {
	b := make([]byte, 64)
	n, _ := lock.ReadAt(b, 0)
	return string(b[:n]) == m.ns
}

// checkReserve refuses, with ErrNoSpace, to take need more bytes of the
// file system of SESSIONS_ROOT when that would leave less than
// DISK_RESERVE_MB free. The message names settings, never host paths.
func (m *Manager) checkReserve(need int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(m.cfg.SessionsRoot, &st); err != nil {
		return fmt.Errorf("session disk: free space of SESSIONS_ROOT: %w", err)
	}
	free := int64(st.Bavail) * st.Bsize
	// What ingestions and exports took of the room and are writing now
	// is not all in the free space yet: counted as gone (on another file
	// system, only while they write).
	m.blobMu.Lock()
	free -= m.blobPending
	m.blobMu.Unlock()
	reserve := int64(m.cfg.DiskReserveMB) << 20
	if free-need < reserve {
		return fmt.Errorf("%w on the host's disk for a new session: %d MiB free, a session takes SESSION_DISK_MB=%d MiB and DISK_RESERVE_MB=%d MiB must stay free for the database and the other sessions",
			ErrNoSpace, free>>20, need>>20, m.cfg.DiskReserveMB)
	}
	return nil
}

// blobRoom returns how many bytes the blobstore may still take before the
// file system holding it keeps less than DISK_RESERVE_MB free, or -1 when
// there is no reserve or the free space cannot be read.
func (m *Manager) blobRoom() int64 {
	if m.cfg.DiskReserveMB <= 0 {
		return -1
	}
	st, err := statfsNearest(m.cfg.BlobstoreDir)
	if err != nil {
		return -1
	}
	return max(int64(st.Bavail)*st.Bsize-int64(m.cfg.DiskReserveMB)<<20, 0)
}

// takeBlobRoom takes size bytes of room, the room above the reserve the
// blobstore had when read, unless ingestions running meanwhile took it:
// what they write is not all in the free space yet. It reports whether it
// took them; the taker gives them back (giveBlobRoom) once its blobs are
// written or abandoned.
func (m *Manager) takeBlobRoom(room, size int64) bool {
	m.blobMu.Lock()
	defer m.blobMu.Unlock()
	if m.blobPending+size > room {
		return false
	}
	m.blobPending += size
	return true
}

// giveBlobRoom gives back what takeBlobRoom took.
func (m *Manager) giveBlobRoom(size int64) {
	m.blobMu.Lock()
	m.blobPending -= size
	m.blobMu.Unlock()
}

// statfsNearest is the statfs of p, or of its nearest existing parent
// (a folder made only when first written is on that one's file system).
func statfsNearest(p string) (syscall.Statfs_t, error) {
	var st syscall.Statfs_t
	for {
		err := syscall.Statfs(p, &st)
		if err == nil || !errors.Is(err, syscall.ENOENT) || filepath.Dir(p) == p {
			return st, err
		}
		p = filepath.Dir(p)
	}
}

// mountDisk makes sure session folder name's workspace is its own file
// system: its image made (the first time) and mounted. The caller holds
// the folder's lock and made the folder (makeSessionDir).
func (m *Manager) mountDisk(ctx context.Context, name string) error {
	dir := filepath.Join(m.cfg.SessionsRoot, name)
	ws, img := filepath.Join(dir, WorkspaceDir), filepath.Join(dir, DiskImage)
	if mounted(ws) {
		// Left mounted by a manager that ended without releasing it.
		return nil
	}
	_, err := os.Lstat(img)
	fresh := errors.Is(err, fs.ErrNotExist)
	if err != nil && !fresh {
		return fmt.Errorf("session disk %s: %w", name, err)
	}
	if fresh {
		if err := m.makeImage(ctx, name); err != nil {
			return err
		}
	}
	// Files in the workspace folder itself (from before the limit, or
	// left by a move a crash cut short) are the key's: they move onto
	// the disk rather than hide under it.
	legacy, err := holdsFiles(ws)
	if err != nil {
		return fmt.Errorf("session disk %s: %w", name, err)
	}
	target := ws
	if legacy {
		target = filepath.Join(dir, "workspace.new")
		if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("session disk %s: %w", name, err)
		}
	}
	// util-linux's mount -o loop reuses a loop device the image already
	// backs (a lost container still holding the disk as this key starts
	// again): the file system is never mounted from two devices at once.
	out, err := exec.CommandContext(ctx, "mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noatime,noinit_itable", img, target).CombinedOutput()
	if err != nil {
		if fresh {
			os.Remove(img)
		}
		return fmt.Errorf("session disk %s: mount its image: %w (%s); SESSION_DISK_MB=%d needs root and loop devices on the host, SESSION_DISK_MB=0 turns the limit off",
			name, err, m.toolSaid(out), m.cfg.SessionDiskMB)
	}
	if fresh {
		// The sandbox sees only what it made.
		if err := os.Remove(filepath.Join(target, "lost+found")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.log.Warn("session disk: remove lost+found", "session_id", name, "err", err)
		}
	}
	if legacy {
		return m.moveLegacy(ctx, name, target, fresh)
	}
	return nil
}

// makeImage allocates and formats session folder name's image, under a
// temporary name until it is whole.
func (m *Manager) makeImage(ctx context.Context, name string) error {
	size := int64(m.cfg.SessionDiskMB) << 20
	// One check and allocation at a time: two sessions starting together
	// cannot both take the last space above the reserve.
	m.diskMu.Lock()
	defer m.diskMu.Unlock()
	if err := m.checkReserve(size); err != nil {
		return err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(m.cfg.SessionsRoot, name)
	tmp := filepath.Join(dir, DiskImage+".tmp-"+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("session disk %s: %w", name, err)
	}
	err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		if errors.Is(err, syscall.ENOSPC) {
			return fmt.Errorf("%w on the host's disk for a new session of SESSION_DISK_MB=%d MiB", ErrNoSpace, m.cfg.SessionDiskMB)
		}
		return fmt.Errorf("session disk %s: allocate: %w", name, err)
	}
	args := []string{"-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard"}
	if uid, gid, ok := numericUser(m.cfg.User); ok {
		args[len(args)-1] += fmt.Sprintf(",root_owner=%d:%d", uid, gid)
	}
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", append(args, tmp)...).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("session disk %s: mkfs.ext4: %w (%s); SESSION_DISK_MB=%d needs mkfs.ext4 (e2fsprogs) on the host, SESSION_DISK_MB=0 turns the limit off",
			name, err, m.toolSaid(out), m.cfg.SessionDiskMB)
	}
	if err := os.Rename(tmp, filepath.Join(dir, DiskImage)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("session disk %s: %w", name, err)
	}
	return nil
}

// moveLegacy copies the files of the workspace folder into its disk,
// mounted at target, then puts the disk in the folder's place. Nothing in
// the sandbox runs meanwhile (no container of the key exists); cp -a
// copies links as links and never reads a FIFO. Once the copy is whole
// the image is never removed: a failure after it leaves both copies, and
// the next start moves what is left again.
func (m *Manager) moveLegacy(ctx context.Context, name, target string, fresh bool) error {
	dir := filepath.Join(m.cfg.SessionsRoot, name)
	ws := filepath.Join(dir, WorkspaceDir)
	fail := func(err error) error {
		if uerr := syscall.Unmount(target, syscall.MNT_DETACH); uerr == nil {
			os.Remove(target)
		}
		return fmt.Errorf("session disk %s: move the workspace's files onto its disk: %w", name, err)
	}
	// --remove-destination: the disk may have files already (the key ran
	// on it, then on the bare folder under another program or with
	// SESSION_DISK_MB=0), and a link the sandbox left there in the place
	// of a file being copied would have cp write through it, as root,
	// anywhere on the host. Removed first, the file is made anew (O_EXCL);
	// a directory where a link is stays refused.
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--remove-destination", "--", ws+"/.", target).CombinedOutput(); err != nil {
		err = fail(fmt.Errorf("%w (%s); SESSION_DISK_MB=%d MiB may be too small for them", err, m.toolSaid(out), m.cfg.SessionDiskMB))
		if fresh {
			os.Remove(filepath.Join(dir, DiskImage))
		}
		return err
	}
	if err := os.RemoveAll(ws); err != nil {
		return fail(err)
	}
	if err := os.Mkdir(ws, 0o700); err != nil {
		return fail(err)
	}
	if err := syscall.Mount(target, ws, "", syscall.MS_BIND, ""); err != nil {
		return fail(err)
	}
	if err := syscall.Unmount(target, syscall.MNT_DETACH); err != nil {
		m.log.Warn("session disk: unmount", "session_id", name, "err", err)
	} else {
		os.Remove(target)
	}
	m.log.Info("session disk: the workspace's files moved onto its own file system", "session_id", name)
	return nil
}

// holdsFiles reports whether folder dir has an entry other than the empty
// artifacts/ and data/ folders makeSessionDir makes.
func holdsFiles(dir string) (bool, error) {
	d, err := openDir(dir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		if (e.Name() != "artifacts" && e.Name() != "data") || !e.IsDir() {
			return true, nil
		}
		if full, err := nonEmpty(filepath.Join(dir, e.Name())); err != nil || full {
			return true, err
		}
	}
	return false, nil
}

// nonEmpty reports whether folder dir has an entry.
func nonEmpty(dir string) (bool, error) {
	d, err := openDir(dir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return len(names) > 0, nil
}

// mounted reports whether something is mounted at dir: it is on another
// device than its parent.
func mounted(dir string) bool {
	var st, up syscall.Stat_t
	if syscall.Lstat(dir, &st) != nil || syscall.Lstat(filepath.Dir(dir), &up) != nil {
		return false
	}
	return st.Dev != up.Dev
}

// unmountDisk unmounts the workspace of session folder name from the host,
// lazily when a host call still has a file of it open. The loop device
// goes with the last mount of it.
func unmountDisk(name string, root string) error {
	ws := filepath.Join(root, name, WorkspaceDir)
	if !mounted(ws) {
		return nil
	}
	err := syscall.Unmount(ws, 0)
	if errors.Is(err, syscall.EBUSY) {
		err = syscall.Unmount(ws, syscall.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("session disk %s: unmount: %w", name, err)
	}
	return nil
}

// releaseDisk unmounts session folder name's workspace from the host
// unless container (its container's name) still exists: the session ended.
func (m *Manager) releaseDisk(ctx context.Context, name, container string) {
	if !m.diskLimited() || !mounted(filepath.Join(m.cfg.SessionsRoot, name, WorkspaceDir)) {
		return
	}
	lock, err := m.lockDisk(name)
	if err != nil {
		m.log.Warn("session disk: release", "session_id", name, "err", err)
		return
	}
	defer lock.Close()
	if !m.ownsDisk(lock) {
		return // another namespace's session of the same folder
	}
	if _, err := m.drv.Inspect(ctx, container); !errors.Is(err, ErrContainerNotFound) {
		return // still held, or the engine cannot say: kept for the sweep
	}
	if err := unmountDisk(name, m.cfg.SessionsRoot); err != nil {
		m.log.Warn("session disk: release", "session_id", name, "err", err)
	}
}

// releaseDisks releases every workspace this namespace mounted under
// SESSIONS_ROOT whose session or warm container has no container: those a
// process left when it ended, or whose container was removed from outside.
func (m *Manager) releaseDisks(ctx context.Context) {
	if !m.diskLimited() {
		return
	}
	for _, rel := range mountsUnder(m.cfg.SessionsRoot) {
		name, ok := strings.CutSuffix(rel, "/"+WorkspaceDir)
		if !ok {
			continue
		}
		if warm, ok := strings.CutPrefix(name, poolDir+"/"); ok {
			if strings.HasPrefix(warm, m.ns+"_pool_") && !strings.Contains(warm, "/") {
				m.releasePoolDisk(ctx, name, warm)
			}
			continue
		}
		if !strings.Contains(name, "/") {
			m.releaseDisk(ctx, name, m.containerName(name))
		}
	}
}

// releasePoolDisk removes warm container folder name, its disk released,
// once no container of its name (container) exists.
func (m *Manager) releasePoolDisk(ctx context.Context, name, container string) {
	lock, err := m.lockDisk(name)
	if errors.Is(err, fs.ErrNotExist) {
		return // claimed and removed meanwhile
	}
	if err != nil {
		m.log.Warn("session disk: release", "dir", name, "err", err)
		return
	}
	defer lock.Close()
	if !mounted(filepath.Join(m.cfg.SessionsRoot, name, WorkspaceDir)) {
		return // claimed by a key meanwhile (see claimDisk)
	}
	if _, err := m.drv.Inspect(ctx, container); !errors.Is(err, ErrContainerNotFound) {
		return
	}
	if err := unmountDisk(name, m.cfg.SessionsRoot); err != nil {
		m.log.Warn("session disk: release", "dir", name, "err", err)
		return
	}
	if err := os.RemoveAll(filepath.Join(m.cfg.SessionsRoot, name)); err != nil {
		m.log.Warn("remove warm container folder", "dir", name, "err", err)
	}
}

// mountsUnder returns the mount points under root, relative to it, from
// this process's mount table.
func mountsUnder(root string) []string {
	// The table names real paths: a root reached through a link is
	// looked for where it leads.
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if rel, ok := strings.CutPrefix(p, root+"/"); ok {
			out = append(out, path.Clean(rel))
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// toolSaid is what a host tool (mount, mkfs.ext4, cp) printed, with the
// host's path of SESSIONS_ROOT replaced by its setting's name: the error
// may reach a tenant.
func (m *Manager) toolSaid(out []byte) string {
	return strings.ReplaceAll(strings.TrimSpace(string(out)), m.cfg.SessionsRoot, "SESSIONS_ROOT")
}
