package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/config"
)

// fileWriter is the optional capability of a Driver to write a file into a
// container through the engine (a TMPFS session on a remote engine).
type fileWriter interface {
	WriteFile(ctx context.Context, id, user, path string, r io.Reader) error
}

// localSession returns the host folder holding the session's /session: the
// BIND folder, or in TMPFS mode the container's tmpfs seen through
// /proc/<pid>/root when the engine is local; "" when files can only go
// through the engine.
func (m *Manager) localSession(ctx context.Context, e *entry) string {
	if m.cfg.SessionStorage == config.StorageBind {
		return m.workspace(e)
	}
	if e.hostRoot == "" || !sameContainer(e.hostRoot, e.containerID) {
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

// stageLocal writes through an os.Root at the session folder, so that a
// link the code planted at /session/<dir> cannot redirect the write.
func (m *Manager) stageLocal(local, dir, name string, r io.Reader) error {
	root, err := os.OpenRoot(local)
	if err != nil {
		return fmt.Errorf("stage %s: %w", name, err)
	}
	defer root.Close()
	if fi, err := root.Lstat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("stage %s: /session/%s is not a folder", name, dir)
	}
	if err := root.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("stage %s: %w", name, err)
	}
	uid, gid, owned := numericUser(m.cfg.User)
	if owned {
		_ = root.Lchown(dir, uid, gid)
	}
	tmp := path.Join(dir, "."+name+".part")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("stage %s: %w", name, err)
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && owned {
		_ = root.Lchown(tmp, uid, gid)
	}
	if err == nil {
		err = root.Rename(tmp, path.Join(dir, name))
	}
	if err != nil {
		root.Remove(tmp)
		return fmt.Errorf("stage %s: %w", name, err)
	}
	return nil
}
