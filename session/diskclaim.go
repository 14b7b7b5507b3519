package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// createOnDisk creates session id's container; when workspaces are file
// systems of their own, with its disk mounted first, the disk's lock held
// until the container exists (so no release unmounts it in between).
func (m *Manager) createOnDisk(ctx context.Context, id string, spec Spec) (string, error) {
	if !m.diskLimited() {
		return m.createContainer(ctx, spec)
	}
	lock, err := m.lockDisk(id)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := m.ownDisk(lock); err != nil {
		return "", fmt.Errorf("session disk %s: %w", id, err)
	}
	if err := m.mountDisk(ctx, id); err != nil {
		return "", err
	}
	// Again, now on the session's own file system: its root is the
	// sandbox's, with artifacts/ and data/.
	if _, err := m.makeSessionDir(id); err != nil {
		return "", err
	}
	cid, err := m.createContainer(ctx, spec)
	if err != nil {
		if _, ierr := m.drv.Inspect(context.WithoutCancel(ctx), spec.Name); errors.Is(ierr, ErrContainerNotFound) {
			if uerr := unmountDisk(id, m.cfg.SessionsRoot); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
	}
	return cid, err
}

// ranBefore reports whether session folder id exists: a key that ran
// before, whose files (on its disk image, or in a workspace from before
// the limit) a warm container's new disk does not have.
func (m *Manager) ranBefore(id string) bool {
	_, err := os.Lstat(filepath.Join(m.cfg.SessionsRoot, id))
	return err == nil
}

// claimDisk gives a warm container's disk (of the folder src) to the
// session folder dst, both relative to SESSIONS_ROOT: the image moves to
// dst's records and its file system is mounted at dst's workspace (the
// container keeps its own mount of it). warm never hands a key that has
// an image of its own a warm container.
func (m *Manager) claimDisk(src, dst string) error {
	if m.ranBefore(dst) {
		// Made since warm looked: its files are not on the warm disk.
		return fmt.Errorf("session disk %s: the key has files of its own", dst)
	}
	if _, err := m.makeSessionDir(dst); err != nil {
		return err
	}
	lock, err := m.lockDisk(dst)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := m.ownDisk(lock); err != nil {
		return fmt.Errorf("session disk %s: %w", dst, err)
	}
	// The warm folder's lock too: another process's sweep sees no
	// container of the warm name (it was just renamed to the key's) and
	// would release the disk. Whoever locks first wins; if the sweep did,
	// the claim fails and the key starts cold.
	srcLock, err := m.lockDisk(src)
	if err != nil {
		return err
	}
	defer srcLock.Close()
	root := m.cfg.SessionsRoot
	from, to := filepath.Join(root, src), filepath.Join(root, dst)
	if !mounted(filepath.Join(from, WorkspaceDir)) {
		return fmt.Errorf("session disk %s: the warm disk was released", dst)
	}
	if _, err := os.Lstat(filepath.Join(to, DiskImage)); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("session disk %s: already has an image", dst)
	}
	if err := os.Rename(filepath.Join(from, DiskImage), filepath.Join(to, DiskImage)); err != nil {
		return fmt.Errorf("session disk %s: %w", dst, err)
	}
	if err := syscall.Mount(filepath.Join(from, WorkspaceDir), filepath.Join(to, WorkspaceDir), "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("session disk %s: %w", dst, err)
	}
	if err := unmountDisk(src, root); err != nil {
		m.log.Warn("session disk: unmount a warm container's disk", "dir", src, "err", err)
	}
	if err := os.RemoveAll(from); err != nil {
		m.log.Warn("remove warm container folder", "dir", from, "err", err)
	}
	return nil
}

// createWarm creates a warm container whose workspace is the folder dir
// (relative to SESSIONS_ROOT), on a disk of its own when workspaces are.
func (m *Manager) createWarm(ctx context.Context, dir string, spec Spec) (string, error) {
	if !m.diskLimited() {
		return m.createContainer(ctx, spec)
	}
	lock, err := m.lockDisk(dir)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := m.mountDisk(ctx, dir); err != nil {
		return "", err
	}
	if _, err := m.makeSessionDir(dir); err != nil {
		return "", err
	}
	return m.createContainer(ctx, spec)
}
