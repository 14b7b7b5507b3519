// Package tenant holds who is calling agentbox's server: each API key is a
// tenant, and a tenant sees and touches only its own sessions. It is shared
// by the server's APIs (OpenSandbox-compatible, native, MCP) so that they
// agree on how a tenant's session keys are made.
package tenant

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"
)

// Tenant is one API key's view of the server. ID is derived from the key
// (a hash: the key itself is never kept beside it, logged or stored).
type Tenant struct {
	ID string
}

// Local is the tenant of a server that has no API keys (allowed only on a
// loopback address): everyone who can connect.
var Local = Tenant{ID: "local"}

// sep separates the tenant from the caller's name in a session key.
const sep = "/"

// SessionKey is the session key of the tenant's session called name: what
// the library's Manager is given. Two tenants' names never meet.
func (t Tenant) SessionKey(name string) string { return t.ID + sep + name }

// Name returns the tenant's name of a session key, and false when the key
// belongs to another tenant (or to no tenant: a library user's key).
func (t Tenant) Name(sessionKey string) (string, bool) {
	name, ok := strings.CutPrefix(sessionKey, t.ID+sep)
	return name, ok && name != ""
}

// ErrNoKey means a request carried no API key, ErrBadKey one no tenant has.
var (
	ErrNoKey  = errors.New("no API key")
	ErrBadKey = errors.New("unknown API key")
)

// Keys maps API keys to tenants. The zero value has no keys.
type Keys struct {
	sums [][sha256.Size]byte
	ids  []string
	byID map[string]bool
}

// NewKeys returns the tenants of keys (empty ones are skipped).
func NewKeys(keys []string) *Keys {
	k := &Keys{byID: map[string]bool{}}
	for _, key := range keys {
		key = strings.TrimSpace(key)
		if key == "" {
			continue
		}
		sum := sha256.Sum256([]byte(key))
		k.sums = append(k.sums, sum)
		id := "t" + hex.EncodeToString(sum[:8])
		k.ids = append(k.ids, id)
		k.byID[id] = true
	}
	return k
}

// Serves reports whether a request of t is served now: t is the tenant of
// one of the keys, or, with no keys (nil or empty), t is Local. What was
// issued to a tenant (an execd token) is checked with it on every request,
// so removing a key and restarting revokes it, and a server given keys
// refuses what its keyless past issued to Local.
func (k *Keys) Serves(t Tenant) bool {
	if k == nil || len(k.ids) == 0 {
		return t == Local
	}
	return k.byID[t.ID]
}

// Len is how many keys there are (none for nil).
func (k *Keys) Len() int {
	if k == nil {
		return 0
	}
	return len(k.ids)
}

// Lookup returns the tenant of key. The comparison takes the same time
// whichever key matches, or none.
func (k *Keys) Lookup(key string) (Tenant, error) {
	if key == "" {
		return Tenant{}, ErrNoKey
	}
	sum := sha256.Sum256([]byte(key))
	found := -1
	for i := range k.sums {
		if subtle.ConstantTimeCompare(sum[:], k.sums[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Tenant{}, ErrBadKey
	}
	return Tenant{ID: k.ids[found]}, nil
}

type ctxKey struct{}

// With returns ctx carrying t.
func With(ctx context.Context, t Tenant) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// From returns the tenant ctx carries.
func From(ctx context.Context) (Tenant, bool) {
	t, ok := ctx.Value(ctxKey{}).(Tenant)
	return t, ok
}
