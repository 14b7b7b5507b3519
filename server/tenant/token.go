package tenant

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrBadToken means a per-sandbox access token is missing, malformed,
// forged, or was issued for another sandbox or by another secret.
var ErrBadToken = errors.New("invalid sandbox access token")

// ErrTokenExpired means a per-sandbox access token was genuine but its
// time is up: the client asks for the sandbox's endpoint again.
var ErrTokenExpired = errors.New("sandbox access token expired")

// DefaultTokenTTL is how long a token lasts when NewTokens is given no
// TTL: the OpenSandbox SDK asks for an endpoint (and so a token) when it
// creates, connects to or resumes a sandbox, not on every call, so a
// token must outlast a working day of one conversation. Revocation and
// recreation do not wait for it: they are checked on every request.
const DefaultTokenTTL = 24 * time.Hour

// maxTokenLen bounds what Verify hashes: an issued token is under 120
// bytes.
const maxTokenLen = 512

// Tokens issues and checks per-sandbox access tokens: what the
// OpenSandbox-compatible API hands out with a sandbox's endpoint (the SDK
// sends it, not the API key, to the sandbox's execution daemon).
//
// A token is "<tenant>.<expiry>.<nonce tag>.<mac>": its tenant, its expiry
// (Unix seconds), a digest of the sandbox's nonce, and an HMAC-SHA256 of
// all of them and the sandbox id. So the token of sandbox A opens nothing
// on B, it stops at its expiry, and, as the nonce is what names one
// incarnation of a sandbox (its container id), a sandbox deleted and made
// again under the same name refuses it. Nothing is stored to check it;
// whether its tenant is still a key is the caller's check (Keys.Serves).
type Tokens struct {
	secret []byte
	ttl    time.Duration
	now    func() time.Time
}

// TokenOption configures NewTokens.
type TokenOption func(*Tokens)

// WithTokenTTL sets how long an issued token lasts; d <= 0 keeps
// DefaultTokenTTL.
func WithTokenTTL(d time.Duration) TokenOption {
	return func(k *Tokens) {
		if d > 0 {
			k.ttl = d
		}
	}
}

// WithTokenClock sets the clock of issue and expiry; default time.Now.
func WithTokenClock(now func() time.Time) TokenOption {
	return func(k *Tokens) {
		if now != nil {
			k.now = now
		}
	}
}

// NewTokens returns Tokens keyed by secret (at least 32 random bytes; a
// server that restarts with another secret invalidates the old tokens,
// and clients ask for the endpoint again).
func NewTokens(secret []byte, opts ...TokenOption) Tokens {
	k := Tokens{secret: append([]byte(nil), secret...), ttl: DefaultTokenTTL, now: time.Now}
	for _, o := range opts {
		o(&k)
	}
	return k
}

// TTL is how long an issued token lasts.
func (k Tokens) TTL() time.Duration {
	if k.ttl <= 0 {
		return DefaultTokenTTL
	}
	return k.ttl
}

func (k Tokens) clock() time.Time {
	if k.now == nil {
		return time.Now()
	}
	return k.now()
}

// Claims are what a genuine token says.
type Claims struct {
	// Tenant is whom the token was issued to.
	Tenant Tenant
	// Expires is when it stops opening anything.
	Expires time.Time
	tag     string
}

// Opens reports whether the token was issued for the sandbox incarnation
// whose nonce is nonce (as Issue was given it). An empty nonce opens
// nothing.
func (c Claims) Opens(nonce string) bool {
	return nonce != "" && hmac.Equal([]byte(c.tag), []byte(nonceTag(nonce)))
}

// nonceTag is the short digest of a nonce a token carries: a container id
// is 64 hex digits, and the token rides on every request.
func nonceTag(nonce string) string {
	var buf [128]byte
	sum := sha256.Sum256(append(append(buf[:0], "agentbox sandbox nonce\x00"...), nonce...))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// mac signs the token's fields, each length-prefixed so that no two
// field lists sign alike. One buffer on the stack, one Write: this runs
// on every execd request.
func (k Tokens) mac(tenantID, sandboxID, expiry, tag string) string {
	var buf [256]byte
	b := append(buf[:0], "agentbox execd token v2"...)
	for _, f := range [...]string{tenantID, sandboxID, expiry, tag} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	h := hmac.New(sha256.New, k.secret)
	h.Write(b)
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0]))
}

// Issue returns a token of t's sandbox sandboxID in its incarnation nonce
// (the sandbox's container id), valid for TTL from now.
func (k Tokens) Issue(t Tenant, sandboxID, nonce string) string {
	expiry := strconv.FormatInt(k.clock().Add(k.TTL()).Unix(), 10)
	tag := nonceTag(nonce)
	return t.ID + "." + expiry + "." + tag + "." + k.mac(t.ID, sandboxID, expiry, tag)
}

// Verify checks that token is genuine, for sandboxID, and not expired,
// and returns what it says: ErrBadToken, or ErrTokenExpired (with the
// claims, so the caller can say when). The caller then checks that the
// tenant is still served (Keys.Serves) and that the sandbox is the
// incarnation the token names (Claims.Opens).
func (k Tokens) Verify(token, sandboxID string) (Claims, error) {
	if len(k.secret) == 0 || len(token) > maxTokenLen {
		return Claims{}, ErrBadToken
	}
	id, rest, ok1 := strings.Cut(token, ".")
	expiry, rest, ok2 := strings.Cut(rest, ".")
	tag, mac, ok3 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !ok3 || id == "" || expiry == "" || tag == "" {
		return Claims{}, ErrBadToken
	}
	// The strings, not their decoded bytes, are compared: one token has
	// one spelling.
	if !hmac.Equal([]byte(mac), []byte(k.mac(id, sandboxID, expiry, tag))) {
		return Claims{}, ErrBadToken
	}
	secs, err := strconv.ParseInt(expiry, 10, 64)
	if err != nil {
		return Claims{}, ErrBadToken // signed, so never: but not trusted
	}
	c := Claims{Tenant: Tenant{ID: id}, Expires: time.Unix(secs, 0), tag: tag}
	if !k.clock().Before(c.Expires) {
		return c, ErrTokenExpired
	}
	return c, nil
}
