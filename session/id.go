package session

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxKeyBytes is the longest session key accepted.
const MaxKeyBytes = 4096

// ID returns the session id of key: a short readable slug of the key followed
// by 16 hex digits of its SHA-256. It is a safe file and container name for
// any key ("../../etc", spaces, unicode, 1 000 characters) and the same in
// every process, so a new manager finds the container and folder of a key
// without any record.
func ID(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:8])
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(key) {
		if b.Len() >= 24 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if b.Len() > 0 && !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	slug := strings.TrimRight(b.String(), "-")
	if slug == "" {
		return h
	}
	return slug + "-" + h
}

// checkKey refuses keys no session can have.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidKey, len(key), MaxKeyBytes)
	}
	return nil
}

// quoteKey shortens a key for error messages.
func quoteKey(key string) string {
	if len(key) > 64 {
		cut := 64
		for cut > 0 && key[cut]&0xC0 == 0x80 {
			cut--
		}
		return fmt.Sprintf("%q…", key[:cut])
	}
	return fmt.Sprintf("%q", key)
}
