package artifacts

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// SecretFileName is the name of the generated token secret file, kept in
// the directory of the artifacts database.
const SecretFileName = ".artifact-token-secret"

// SecretPath returns where the generated token secret of the database at
// artifactsDB (config.ArtifactsDB) is kept, so that the process signing
// download URLs and the one serving them find the same file.
func SecretPath(artifactsDB string) string {
	return filepath.Join(filepath.Dir(artifactsDB), SecretFileName)
}

// LoadOrCreateSecret returns the token secret kept in the file at path,
// creating the file with a new random secret (64 hex characters, 256 bits)
// if it does not exist. The file is the secret: its bytes, less trailing
// line breaks and spaces, so an operator may also write one by hand.
//
// Creation is atomic and exclusive: the secret is written and synced to a
// temporary file, which is then hard-linked to path; a link fails when path
// exists, so processes starting at once all end up reading the one secret
// that won. The parent directory is created (mode 0700) if missing.
//
// A file readable or writable by group or others, or holding fewer than
// MinSecretLen bytes, is refused rather than repaired, since it may already
// have leaked or been chosen badly.
func LoadOrCreateSecret(path string) ([]byte, error) {
	secret, err := readSecret(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return secret, err
	}
	if err := createSecret(path); err != nil {
		return nil, err
	}
	return readSecret(path)
}

// readSecret reads and checks the secret file at path. Its errors wrap
// fs.ErrNotExist when there is no file.
func readSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read token secret: %w", err)
	}
	defer f.Close()
	// Stat the open file, not the path, so the checks apply to the bytes
	// read even if the file is replaced meanwhile.
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read token secret: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("read token secret: %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("read token secret: %s has mode %04o, open to group or others; "+
			"make it owner-only (chmod 600) if it has not leaked, or remove it to have a new secret made", path, perm)
	}
	// A secret file is tiny; the limit guards against a wrong path.
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("read token secret: %w", err)
	}
	data = bytes.TrimRight(data, "\r\n\t ")
	if len(data) < MinSecretLen {
		return nil, fmt.Errorf("read token secret: %s holds %d bytes; want at least %d", path, len(data), MinSecretLen)
	}
	return data, nil
}

// createSecret makes the secret file at path unless it exists. Losing the
// race to another process is success.
func createSecret(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create token secret: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("create token secret: %w", err)
	}
	text := hex.AppendEncode(nil, raw)
	text = append(text, '\n')

	// CreateTemp makes the file with mode 0600, so the secret is never
	// readable by others, whatever the umask.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create token secret: %w", err)
	}
	// The temporary name goes whether the link is made or not; path keeps
	// the content through its own link.
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(text)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("create token secret: %w", werr)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // another process made it first; use theirs
		}
		return fmt.Errorf("create token secret: %w", err)
	}
	// Sync the directory so the new name survives a crash; a secret that
	// vanished would invalidate every token handed out.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
