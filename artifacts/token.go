package artifacts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Audience is the "aud" claim of every download token, so that a token
// signed with the same secret for some other purpose is never taken for a
// download token.
const Audience = "agentbox-artifacts"

// DefaultTokenTTL is how long a token lives when NewSigner is given no TTL.
const DefaultTokenTTL = 10 * time.Minute

// MinSecretLen is the shortest secret, in bytes, a Signer accepts: 256 bits,
// the size of the HS256 hash.
const MinSecretLen = 32

// tokenLeeway absorbs small clock differences between the process that signs
// (the session manager) and the one that verifies (artifact-server). It is
// kept small because it lengthens every token's life by as much.
const tokenLeeway = 5 * time.Second

var (
	// ErrTokenInvalid means a token is malformed, not signed by one of the
	// Signer's keys with HS256, or not a download token (wrong audience,
	// no expiry, no subject).
	ErrTokenInvalid = errors.New("invalid download token")
	// ErrTokenExpired means a token was genuine but its lifetime is over.
	ErrTokenExpired = errors.New("download token expired")
	// ErrTokenWrongArtifact means a genuine, unexpired token was issued for
	// another artifact.
	ErrTokenWrongArtifact = errors.New("download token is for another artifact")
)

// Key is one HMAC secret and the key id ("kid" header) that names it in
// tokens.
type Key struct {
	// ID names the key in token headers; empty means KeyID(Secret).
	ID string
	// Secret is the HMAC key, at least MinSecretLen bytes.
	Secret []byte
}

// Keys is the key set of a Signer: tokens are signed with Current and
// verified with whichever key their "kid" names, so that after a rotation the
// tokens already handed out keep working until they expire.
type Keys struct {
	// Current signs new tokens and verifies them.
	Current Key
	// Previous keys only verify. Drop a key once the longest token TTL has
	// passed since it stopped being current.
	Previous []Key
}

// KeyID derives a key id from a secret. It is a truncated hash under a
// fixed label, so that the id says which key signed a token without
// telling anything useful about the key.
func KeyID(secret []byte) string {
	h := sha256.New()
	h.Write([]byte("agentbox artifact token key id\x00"))
	h.Write(secret)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Signer issues and checks download tokens: HS256 JWTs whose subject is one
// artifact id. A Signer is safe for concurrent use; it does no I/O.
type Signer struct {
	current Key
	header  string            // the current key's JWT header, base64url-encoded
	keys    map[string][]byte // kid → secret, current included
	ttl     time.Duration
}

// Claims is what a verified token says.
type Claims struct {
	// ArtifactID is the artifact the token opens (the "sub" claim).
	ArtifactID string
	// KeyID names the key that signed the token.
	KeyID string
	// Expires is when the token stops being accepted (the "exp" claim,
	// whole seconds); the verifier grants a few seconds of leeway beyond it.
	Expires time.Time
}

// NewSigner returns a Signer for keys whose tokens live for ttl; 0 means
// DefaultTokenTTL. Every secret must be at least MinSecretLen bytes, and no
// two keys may share an id.
func NewSigner(keys Keys, ttl time.Duration) (*Signer, error) {
	if ttl < 0 {
		return nil, fmt.Errorf("new token signer: negative TTL %s", ttl)
	}
	if ttl == 0 {
		ttl = DefaultTokenTTL
	}
	s := &Signer{keys: make(map[string][]byte), ttl: ttl}
	for i, k := range append([]Key{keys.Current}, keys.Previous...) {
		if len(k.Secret) < MinSecretLen {
			return nil, fmt.Errorf("new token signer: key %d has a %d-byte secret; want at least %d bytes", i, len(k.Secret), MinSecretLen)
		}
		if k.ID == "" {
			k.ID = KeyID(k.Secret)
		}
		if _, dup := s.keys[k.ID]; dup {
			return nil, fmt.Errorf("new token signer: key id %q used twice", k.ID)
		}
		// Copied so that a caller reusing its slice cannot change a key.
		k.Secret = append([]byte(nil), k.Secret...)
		s.keys[k.ID] = k.Secret
		if i == 0 {
			s.current = k
		}
	}
	kid, err := json.Marshal(s.current.ID)
	if err != nil {
		return nil, fmt.Errorf("new token signer: %w", err)
	}
	s.header = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","kid":` + string(kid) + `,"typ":"JWT"}`))
	return s, nil
}

// TTL returns the lifetime of the tokens s signs.
func (s *Signer) TTL() time.Duration { return s.ttl }

// Sign returns a token for the artifact id, valid from now for the Signer's
// TTL, and its expiry (truncated to whole seconds, as the token holds it).
func (s *Signer) Sign(id string, now time.Time) (token string, expires time.Time, err error) {
	if id == "" {
		return "", time.Time{}, errors.New("sign token: empty artifact id")
	}
	// The token is put together here rather than by the jwt package, which
	// takes five times as long through reflection and maps: an execution
	// that makes a thousand files signs a thousand URLs while its caller
	// waits. Verify parses with the jwt package, and the tests check that
	// it accepts what this makes.
	iat, exp := now.Truncate(time.Second), now.Add(s.ttl).Truncate(time.Second)
	sub, err := json.Marshal(id)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token: %w", err)
	}
	claims := make([]byte, 0, 128)
	claims = append(claims, `{"sub":`...)
	claims = append(claims, sub...)
	claims = append(claims, `,"aud":["`+Audience+`"],"exp":`...)
	claims = strconv.AppendInt(claims, exp.Unix(), 10)
	claims = append(claims, `,"iat":`...)
	claims = strconv.AppendInt(claims, iat.Unix(), 10)
	claims = append(claims, '}')
	enc := base64.RawURLEncoding
	b := make([]byte, 0, len(s.header)+1+enc.EncodedLen(len(claims))+1+enc.EncodedLen(sha256.Size))
	b = append(b, s.header...)
	b = append(b, '.')
	b = enc.AppendEncode(b, claims)
	mac := hmac.New(sha256.New, s.current.Secret)
	mac.Write(b)
	b = append(b, '.')
	b = enc.AppendEncode(b, mac.Sum(nil))
	return string(b), exp, nil
}

// Verify checks that token was signed by one of the Signer's keys with
// HS256, is a download token, has not expired at now, and opens the
// artifact id. Its errors match ErrTokenInvalid, ErrTokenExpired or
// ErrTokenWrongArtifact; only a token with a good signature is ever reported
// expired or for another artifact.
func (s *Signer) Verify(token, id string, now time.Time) (Claims, error) {
	// A parser per call because the time function is a parser option; it
	// costs a few small allocations next to the HMAC.
	p := jwt.NewParser(
		// Only HS256: "none" and the RS/HS confusion (an HMAC made with a
		// public key) are refused before any key is looked up.
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(tokenLeeway),
		jwt.WithTimeFunc(func() time.Time { return now }),
		// Non-canonical base64 would let several strings carry one
		// signature; strict decoding keeps tokens unique.
		jwt.WithStrictDecoding(),
	)
	var rc jwt.RegisteredClaims
	var kid string
	_, err := p.ParseWithClaims(token, &rc, func(t *jwt.Token) (any, error) {
		// Checked again here so that the key can never reach another
		// algorithm's verifier, whatever the parser options.
		if t.Method != jwt.SigningMethodHS256 {
			return nil, errors.New("unexpected signing method")
		}
		kid, _ = t.Header["kid"].(string)
		key, ok := s.keys[kid]
		if !ok {
			return nil, errors.New("unknown key id")
		}
		return key, nil
	})
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrTokenMalformed):
		return Claims{}, fmt.Errorf("%w: malformed", ErrTokenInvalid)
	case errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, jwt.ErrTokenSignatureInvalid):
		// Both unknown key ids and foreign algorithms land here.
		return Claims{}, fmt.Errorf("%w: bad signature, algorithm or key id", ErrTokenInvalid)
	case errors.Is(err, jwt.ErrTokenInvalidAudience), errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		// Checked before expiry: a token that is not a download token
		// is invalid whether or not it has also expired.
		return Claims{}, fmt.Errorf("%w: not a download token", ErrTokenInvalid)
	case errors.Is(err, jwt.ErrTokenExpired):
		return Claims{}, ErrTokenExpired
	default:
		return Claims{}, fmt.Errorf("%w: claims", ErrTokenInvalid)
	}
	if rc.Subject == "" {
		return Claims{}, fmt.Errorf("%w: no artifact id", ErrTokenInvalid)
	}
	if rc.Subject != id {
		return Claims{}, ErrTokenWrongArtifact
	}
	return Claims{ArtifactID: rc.Subject, KeyID: kid, Expires: rc.ExpiresAt.Time}, nil
}
