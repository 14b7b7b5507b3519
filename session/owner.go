package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ownersDir holds one lock file per live Manager, next to the database the
// Managers share.
const ownersDir = ".agentbox-managers"

// owner is this Manager as the owner of the executions it starts. It holds
// an exclusive flock on a file of its own while it lives; the kernel drops
// the lock when the process ends, however it ends (SIGKILL included). So a
// Manager can tell an execution another live process is running (leave it
// to that process) from one a dead process left (finish it).
type owner struct {
	id   string
	dir  string
	file *os.File
}

func openOwner(db string) (*owner, error) {
	dir := filepath.Join(filepath.Dir(db), ownersDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("manager lock: %w", err)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	o := &owner{id: hex.EncodeToString(b[:]), dir: dir}
	f, err := os.OpenFile(filepath.Join(dir, o.id+".lock"), os.O_CREATE|os.O_EXCL|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("manager lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("manager lock %s: %w", f.Name(), err)
	}
	o.file = f
	return o, nil
}

// close releases the lock and removes its file.
func (o *owner) close() error {
	if o == nil || o.file == nil {
		return nil
	}
	err := os.Remove(o.file.Name())
	return errors.Join(err, o.file.Close())
}

// othersAlive reports whether the Manager id is another process that still
// lives. This Manager is not "another": an execution of its own with no
// result recorded is not in flight once the caller holds the session's turn.
// A lock file left by a dead process is removed on the way.
func (o *owner) otherAlive(id string) bool {
	if id == "" || id == o.id {
		return false
	}
	path := filepath.Join(o.dir, id+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	os.Remove(path)
	return false
}
