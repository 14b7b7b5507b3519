package session

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// A BIND session's host folder, SESSIONS_ROOT/<session id>/, holds the
// records the host writes (session.log, session_metadata.json,
// python_state.json, cache_datasets.json) and WorkspaceDir, the folder
// mounted as the container's /session. The container never sees the records'
// folder, so nothing the sandbox does can put a link, a FIFO or a folder
// where the host writes. Every host access to these folders still goes
// through a descriptor of the folder, never follows a link, never opens
// anything but a regular file and never blocks on one, so that a folder left
// some other way (the old layout, where /session was the session folder
// itself, or a careless hand) cannot turn a host write into a write
// elsewhere.

// WorkspaceDir is the folder of SESSIONS_ROOT/<session id>/ that the
// container mounts as /session in BIND mode.
const WorkspaceDir = "workspace"

// errLink is a symbolic link where the host expected a file or folder: it is
// never followed.
var errLink = errors.New("a symbolic link, not followed")

// workspace returns the host folder mounted as e's /session (BIND mode).
func (m *Manager) workspace(e *entry) string { return filepath.Join(m.dir(e), WorkspaceDir) }

// openDir opens path as a folder without following a link at its last
// element. Its parents are SESSIONS_ROOT and folders only the host makes.
func openDir(dir string) (*os.File, error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		// O_DIRECTORY wins over O_NOFOLLOW: a link is ENOTDIR, not ELOOP.
		if fi, lerr := os.Lstat(dir); err == syscall.ELOOP || lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			err = errLink
		}
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// openAt opens name, one path element, in dir: never through a link, never
// blocking (a FIFO fails at once instead of waiting for a peer), and only if
// it is a regular file; anything else is errNotRegular or errLink, wrapped
// with what it is.
func openAt(dir *os.File, name string, flag int, perm uint32) (*os.File, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("not a plain file name")}
	}
	full := filepath.Join(dir.Name(), name)
	var fd int
	var err error
	for {
		fd, err = syscall.Openat(int(dir.Fd()), name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
		if err != syscall.EINTR {
			break
		}
	}
	switch err {
	case nil:
	case syscall.ELOOP:
		return nil, &fs.PathError{Op: "open", Path: full, Err: errLink}
	case syscall.ENXIO: // a FIFO with no reader, opened to write
		return nil, &fs.PathError{Op: "open", Path: full, Err: fmt.Errorf("%w (a named pipe)", errNotRegular)}
	case syscall.EISDIR:
		return nil, &fs.PathError{Op: "open", Path: full, Err: fmt.Errorf("%w (a folder)", errNotRegular)}
	default:
		return nil, &fs.PathError{Op: "open", Path: full, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: full, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: full, Err: fmt.Errorf("%w (%s)", errNotRegular, kindOf(st.Mode))}
	}
	return os.NewFile(uintptr(fd), full), nil
}

func kindOf(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "a folder"
	case syscall.S_IFIFO:
		return "a named pipe"
	case syscall.S_IFSOCK:
		return "a socket"
	case syscall.S_IFCHR, syscall.S_IFBLK:
		return "a device"
	case syscall.S_IFLNK:
		return "a symbolic link"
	}
	return fmt.Sprintf("file type %#o", mode&syscall.S_IFMT)
}

// appendRecord appends line to the record name in dir, in one write, so
// that a reader never sees half a line from this process.
func appendRecord(dir, name string, line []byte) error {
	d, err := openDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	f, err := openAt(d, name, syscall.O_WRONLY|syscall.O_APPEND|syscall.O_CREAT, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeRecord replaces the record name in dir with v as indented JSON,
// atomically: a reader sees the old file or the new one, never a mix.
// Whatever was at name (a link, a FIFO) is replaced, never followed; a
// folder there is an error.
func writeRecord(dir, name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	d, err := openDir(dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer d.Close()
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := "." + name + "." + hex.EncodeToString(b[:])
	f, err := openAt(d, tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, err = f.Write(append(data, '\n'))
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
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

func unlinkAt(dir *os.File, name string) error {
	return syscall.Unlinkat(int(dir.Fd()), name)
}

// makeSessionDir makes SESSIONS_ROOT/<name>/ (the host's records) and its
// workspace, owned by the sandbox user, with artifacts/ and data/ in it, and
// returns the workspace's path (what the container mounts). A session folder
// of the old layout, where the whole folder was /session, becomes the
// workspace of a new one: the session's files stay where its code expects
// them, and the records the old layout kept among them stay there too (they
// were the sandbox's to rewrite, so they are never trusted as the host's).
func (m *Manager) makeSessionDir(name string) (string, error) {
	if err := os.MkdirAll(m.cfg.SessionsRoot, 0o700); err != nil {
		return "", fmt.Errorf("session folder: %w", err)
	}
	root, err := os.OpenRoot(m.cfg.SessionsRoot)
	if err != nil {
		return "", fmt.Errorf("session folder: %w", err)
	}
	defer root.Close()
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("session folder: %w", err)
		}
	}
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := root.Mkdir(name, 0o700); err != nil {
			return "", fmt.Errorf("session folder: %w", err)
		}
	case err != nil:
		return "", fmt.Errorf("session folder: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", fmt.Errorf("session folder %s: %w", name, errLink)
	case !fi.IsDir():
		return "", fmt.Errorf("session folder %s: %w", name, errNotRegular)
	case !isRecordsDir(root, name, fi):
		if err := migrateOldLayout(root, name); err != nil {
			return "", err
		}
		m.log.Info("session folder moved to the new layout: its files are now under "+WorkspaceDir, "dir", filepath.Join(m.cfg.SessionsRoot, name))
	}
	ws := path.Join(name, WorkspaceDir)
	fi, err = root.Lstat(ws)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := root.Mkdir(ws, 0o700); err != nil {
			return "", fmt.Errorf("session folder: %w", err)
		}
	case err != nil:
		return "", fmt.Errorf("session folder: %w", err)
	case !fi.IsDir():
		return "", fmt.Errorf("session folder %s: %w", ws, errNotRegular)
	}
	// Every time, not only when made: a folder put there by hand, or moved
	// from the old layout, must be the sandbox's to write.
	if err := m.giveToSandbox(root, ws); err != nil {
		return "", err
	}
	// What code is told to use exists from the start. A name the code
	// already made something else of stays as it is: its own business.
	for _, sub := range []string{"artifacts", "data"} {
		p := path.Join(ws, sub)
		if _, err := root.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			if err := root.Mkdir(p, 0o755); err != nil {
				return "", fmt.Errorf("session folder: %w", err)
			}
			if err := m.giveToSandbox(root, p); err != nil {
				return "", err
			}
		}
	}
	return filepath.Join(m.cfg.SessionsRoot, ws), nil
}

// isRecordsDir tells a session folder of the new layout (made by the host,
// writable by it alone, with a workspace) from one of the old layout
// (mounted as /session, so the sandbox user's or open to all).
func isRecordsDir(root *os.Root, name string, fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	ws, err := root.Lstat(path.Join(name, WorkspaceDir))
	return err == nil && ws.IsDir()
}

// migrateOldLayout turns SESSIONS_ROOT/<name>, an old-layout session folder,
// into SESSIONS_ROOT/<name>/workspace, by renames only.
func migrateOldLayout(root *os.Root, name string) error {
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := name + ".old-layout-" + hex.EncodeToString(b[:])
	if err := root.Rename(name, tmp); err != nil {
		return fmt.Errorf("session folder: move the old layout aside: %w", err)
	}
	if err := root.Mkdir(name, 0o700); err != nil {
		return fmt.Errorf("session folder: %w", err)
	}
	if err := root.Rename(tmp, path.Join(name, WorkspaceDir)); err != nil {
		return fmt.Errorf("session folder: move the old layout into %s: %w", WorkspaceDir, err)
	}
	return nil
}

// giveToSandbox makes a folder the host made writable by the sandbox user:
// its owner when this process may change owners, else open to all (and
// said so in the log).
func (m *Manager) giveToSandbox(root *os.Root, name string) error {
	uid, gid, ok := numericUser(m.cfg.User)
	if !ok || os.Geteuid() == uid {
		return nil
	}
	if err := root.Lchown(name, uid, gid); err != nil {
		m.log.Warn("session folder open to all users: cannot give it to the sandbox user", "dir", filepath.Join(m.cfg.SessionsRoot, name), "err", err)
		if err := root.Chmod(name, 0o777); err != nil {
			return fmt.Errorf("session folder: %w", err)
		}
	}
	return nil
}
