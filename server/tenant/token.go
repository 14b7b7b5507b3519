package tenant

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// ErrBadToken means a per-sandbox access token is missing, malformed, or
// was issued for another sandbox.
var ErrBadToken = errors.New("invalid sandbox access token")

// Tokens issues and checks per-sandbox access tokens: what the
// OpenSandbox-compatible API hands out with a sandbox's endpoint (the SDK
// sends it, not the API key, to the sandbox's execution daemon). A token
// names its tenant and is bound to one sandbox id by an HMAC, so the token
// of sandbox A opens nothing on B, and nothing is stored to check it.
type Tokens struct {
	secret []byte
}

// NewTokens returns Tokens keyed by secret (at least 32 random bytes; a
// server that restarts with another secret invalidates the old tokens,
// and clients ask for the endpoint again).
func NewTokens(secret []byte) Tokens {
	return Tokens{secret: append([]byte(nil), secret...)}
}

func (k Tokens) mac(tenantID, sandboxID string) string {
	h := hmac.New(sha256.New, k.secret)
	h.Write([]byte(tenantID))
	h.Write([]byte{0})
	h.Write([]byte(sandboxID))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// Issue returns the token of t's sandbox sandboxID.
func (k Tokens) Issue(t Tenant, sandboxID string) string {
	return t.ID + "." + k.mac(t.ID, sandboxID)
}

// Verify returns the tenant a token was issued to for sandboxID, or
// ErrBadToken.
func (k Tokens) Verify(token, sandboxID string) (Tenant, error) {
	id, mac, ok := strings.Cut(token, ".")
	if !ok || id == "" || len(k.secret) == 0 {
		return Tenant{}, ErrBadToken
	}
	if !hmac.Equal([]byte(mac), []byte(k.mac(id, sandboxID))) {
		return Tenant{}, ErrBadToken
	}
	return Tenant{ID: id}, nil
}
