package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
)

// localSession returns the host folder holding the session's /session: the
// BIND folder, or in TMPFS mode the container's tmpfs seen through
// /proc/<pid>/root when the engine is local; "" when files can only go
// through the engine.
func (m *Manager) localSession(ctx context.Context, e *entry) string {
	if m.cfg.SessionStorage == config.StorageBind {
		return m.workspace(e)
	}
	if e.hostRoot == "" || !docker.SameContainer(e.hostRoot, e.containerID) {
		e.hostRoot = ""
		if hr, ok := m.drv.(hostRooter); ok {
			e.hostRoot = hr.HostRoot(ctx, e.containerID)
		}
	}
	if e.hostRoot == "" {
		return ""
	}
	// /session is a mount point, which the code cannot replace with a link
	// (the kernel refuses to rename or remove a mount point).
	return filepath.Join(e.hostRoot, "session")
}

// stage writes r into the session as /session/<dir>/<name> (name already
// safe: one path element), atomically: code never sees half a file. It
// returns the path code reads it at.
func (m *Manager) stage(ctx context.Context, e *entry, dir, name string, r io.Reader) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("stage %q: not a plain file name", name)
	}
	target := path.Join("/session", dir, name)
	if local := m.localSession(ctx, e); local != "" {
		return target, m.stageLocal(local, dir, name, r)
	}
	fw, ok := m.drv.(fileWriter)
	if !ok {
		return "", errors.New("the driver cannot write files into a container")
	}
	if err := fw.WriteFile(ctx, e.containerID, m.cfg.User, target, r); err != nil {
		return "", fmt.Errorf("stage %s: %w", target, err)
	}
	return target, nil
}

// stageLocal writes under the session folder local through descriptors
// only: the folder dir is opened without following a link, the temporary
// file is created under a random name with O_EXCL|O_NOFOLLOW|O_NONBLOCK (so
// nothing the code planted, a link or a FIFO, is opened or waited on) and
// checked to be a regular file, then renamed over name in the same folder.
func (m *Manager) stageLocal(local, dir, name string, r io.Reader) error {
	top, err := openDir(local)
	if err != nil {
		return fmt.Errorf("stage %s: %w", name, err)
	}
	defer top.Close()
	d, err := openDirAt(top, dir)
	if err != nil {
		return fmt.Errorf("stage %s: /session/%s: %w", name, dir, err)
	}
	defer d.Close()
	uid, gid, owned := numericUser(m.cfg.User)
	if owned {
		_ = d.Chown(uid, gid)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	tmp := "." + name + "." + hex.EncodeToString(b[:]) + ".part"
	f, err := openAt(d, tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("stage %s: %w", name, err)
	}
	_, err = io.Copy(f, r)
	if err == nil && owned {
		err = f.Chown(uid, gid)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syscall.Renameat(int(d.Fd()), tmp, int(d.Fd()), name)
		if err == syscall.EISDIR || err == syscall.ENOTEMPTY || err == syscall.EEXIST {
			err = fmt.Errorf("%w (a folder)", errNotRegular)
		}
	}
	if err != nil {
		_ = unlinkAt(d, tmp)
		return fmt.Errorf("stage %s: %w", name, err)
	}
	return nil
}

// openDirAt opens (making it if missing) the folder name, one path element,
// in dir, never through a link.
func openDirAt(dir *os.File, name string) (*os.File, error) {
	flags := syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	fd, err := syscall.Openat(int(dir.Fd()), name, flags, 0)
	if err == syscall.ENOENT {
		if err = syscall.Mkdirat(int(dir.Fd()), name, 0o755); err == nil || err == syscall.EEXIST {
			fd, err = syscall.Openat(int(dir.Fd()), name, flags, 0)
		}
	}
	if err != nil {
		// O_DIRECTORY wins over O_NOFOLLOW: a link is ENOTDIR, not ELOOP.
		// (Lstat only names what is there, for the message.)
		if err == syscall.ELOOP || err == syscall.ENOTDIR {
			fi, lerr := os.Lstat(filepath.Join(dir.Name(), name))
			if err == syscall.ELOOP || lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return nil, errLink
			}
			return nil, errors.New("not a folder")
		}
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir.Name(), name)), nil
}
