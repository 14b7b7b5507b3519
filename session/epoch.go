package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/store"
)

// The lifecycle epoch is a small file beside the database (in the
// managers' lock folder) whose content every pause, resume, renewal and
// expiry changes, in whichever process. A call on a session reads it
// (a few microseconds) and asks the database for the session's pause and
// expiry (a hundred) only when it changed since that session last asked:
// the exec round trip stays that of a Manager without a lifecycle, and a
// change by another process still counts at the next call.

func (m *Manager) epochPath() string {
	return filepath.Join(filepath.Dir(m.cfg.ArtifactsDB), ownersDir, "lifecycle-"+m.ns)
}

// epoch returns the epoch's content, "none" before the first change;
// false if it cannot be read, which costs a database read per call.
func (m *Manager) epoch() (string, bool) {
	b, err := os.ReadFile(m.epochPath())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "none", true
	case err != nil || len(b) == 0:
		return "", false
	}
	return string(b), true
}

// bumpEpoch records that a session's pause or expiry changed: after the
// database says so, before anyone may rely on it.
func (m *Manager) bumpEpoch() error {
	var b [16]byte
	_, _ = rand.Read(b[:])
	path := m.epochPath()
	tmp := path + "." + hex.EncodeToString(b[:4])
	if err := os.WriteFile(tmp, []byte(hex.EncodeToString(b[:])), 0o600); err != nil {
		return fmt.Errorf("lifecycle epoch: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("lifecycle epoch: %w", err)
	}
	return nil
}

// liveness returns what the database says of e's pause and expiry, from
// e's copy while the epoch has not changed.
func (m *Manager) liveness(ctx context.Context, e *entry) (store.Liveness, error) {
	ep, ok := m.epoch() // before the read: a change after it shows as a new epoch
	// Under m.mu: file operations ask without the turn.
	m.mu.Lock()
	live, liveEpoch := e.live, e.liveEpoch
	m.mu.Unlock()
	if live != nil && ok && ep == liveEpoch {
		return *live, nil
	}
	l, err := m.store.SessionLiveness(ctx, m.ns, e.id)
	if err != nil {
		return store.Liveness{}, err
	}
	m.mu.Lock()
	e.live, e.liveEpoch = &l, ep
	m.mu.Unlock()
	return l, nil
}
