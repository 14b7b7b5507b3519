package artifacts_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentbox/agentbox/artifacts"
)

var (
	tokSecretA = []byte("0123456789abcdef0123456789abcdef-key-a")
	tokSecretB = []byte("0123456789abcdef0123456789abcdef-key-b")
	tokT0      = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
)

func tokSigner(t testing.TB, keys artifacts.Keys, ttl time.Duration) *artifacts.Signer {
	t.Helper()
	s, err := artifacts.NewSigner(keys, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tokSign(t testing.TB, s *artifacts.Signer, id string, now time.Time) string {
	t.Helper()
	tok, _, err := s.Sign(id, now)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// rawToken builds a JWT by hand, for the headers and algorithms no honest
// signer would produce. sign gets the signing input and returns the raw
// signature (nil for none).
func rawToken(t testing.TB, header, claims map[string]any, sign func(input string) []byte) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(header) + "." + enc(claims)
	var sig []byte
	if sign != nil {
		sig = sign(input)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func hs256(key []byte) func(string) []byte {
	return func(input string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(input))
		return m.Sum(nil)
	}
}

func goodClaims(id string, now time.Time) map[string]any {
	return map[string]any{
		"sub": id,
		"aud": []string{artifacts.Audience},
		"exp": now.Add(10 * time.Minute).Unix(),
		"iat": now.Unix(),
	}
}

func TestSignVerifyRoundTrip(t *testing.T) {
	s := tokSigner(t, artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}}, 0)
	if s.TTL() != artifacts.DefaultTokenTTL {
		t.Errorf("TTL = %s, want the default %s", s.TTL(), artifacts.DefaultTokenTTL)
	}
	now := tokT0.Add(500 * time.Millisecond)
	tok, exp, err := s.Sign("art-1", now)
	if err != nil {
		t.Fatal(err)
	}
	if want := tokT0.Add(10 * time.Minute); !exp.Equal(want) {
		t.Errorf("expires %s, want %s (whole seconds)", exp, want)
	}
	c, err := s.Verify(tok, "art-1", now.Add(9*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if c.ArtifactID != "art-1" || c.KeyID != artifacts.KeyID(tokSecretA) || !c.Expires.Equal(exp) {
		t.Errorf("claims %+v", c)
	}
}

// TestSignIsStandard parses what Sign makes with the jwt package alone, as
// another service checking the tokens would: a standard HS256 JWT with the
// key id in its header, whatever the artifact id holds.
func TestSignIsStandard(t *testing.T) {
	s := tokSigner(t, artifacts.Keys{Current: artifacts.Key{ID: `k"1\`, Secret: tokSecretA}}, time.Minute)
	for _, id := range []string{"art-1", `quote" back\slash`, "new\nline", "ünïcode", "<script>"} {
		tok, exp, err := s.Sign(id, tokT0)
		if err != nil {
			t.Fatal(err)
		}
		var claims jwt.RegisteredClaims
		parsed, err := jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return tokSecretA, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithTimeFunc(func() time.Time { return tokT0 }),
			jwt.WithAudience(artifacts.Audience), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		if parsed.Header["kid"] != `k"1\` || parsed.Header["typ"] != "JWT" {
			t.Errorf("%q: header %v", id, parsed.Header)
		}
		if claims.Subject != id || !claims.ExpiresAt.Equal(exp) || !claims.IssuedAt.Equal(tokT0) {
			t.Errorf("%q: claims %+v, expires %v", id, claims, exp)
		}
		if _, err := s.Verify(tok, id, tokT0); err != nil {
			t.Errorf("%q: Verify: %v", id, err)
		}
	}
}

func TestVerifyRejects(t *testing.T) {
	kid := artifacts.KeyID(tokSecretA)
	s := tokSigner(t, artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}}, 10*time.Minute)
	good := tokSign(t, s, "art-1", tokT0)
	parts := strings.Split(good, ".")

	// Same key id, another secret: what an attacker guessing keys gets.
	impostor := tokSigner(t, artifacts.Keys{Current: artifacts.Key{ID: kid, Secret: tokSecretB}}, 10*time.Minute)

	forgedPayload := func() string {
		claims := goodClaims("art-2", tokT0)
		b, _ := json.Marshal(claims)
		return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
	}
	// The last character of a 32-byte signature carries two unused bits;
	// setting one gives another spelling of the same bytes.
	nonCanonical := func() string {
		sig := []byte(parts[2])
		last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", sig[len(sig)-1])
		sig[len(sig)-1] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last^1]
		return parts[0] + "." + parts[1] + "." + string(sig)
	}
	claimsWithout := func(key string) map[string]any {
		c := goodClaims("art-1", tokT0)
		delete(c, key)
		return c
	}
	noneLib, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims(goodClaims("art-1", tokT0))).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	hs512, err := func() (string, error) {
		tk := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims(goodClaims("art-1", tokT0)))
		tk.Header["kid"] = kid
		return tk.SignedString(tokSecretA)
	}()
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		token string
		id    string
		now   time.Time
		want  error
	}{
		{"empty", "", "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"garbage", "not a token", "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"two parts", parts[0] + "." + parts[1], "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"no signature", parts[0] + "." + parts[1] + ".", "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"forged payload", forgedPayload(), "art-2", tokT0, artifacts.ErrTokenInvalid},
		{"non-canonical signature", nonCanonical(), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"wrong key, same kid", tokSign(t, impostor, "art-1", tokT0), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"alg none (library)", noneLib, "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"alg none with kid", rawToken(t, map[string]any{"alg": "none", "kid": kid}, goodClaims("art-1", tokT0), nil), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"alg NONE", rawToken(t, map[string]any{"alg": "NONE", "kid": kid}, goodClaims("art-1", tokT0), nil), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"RS256 header, HMAC body", rawToken(t, map[string]any{"alg": "RS256", "kid": kid}, goodClaims("art-1", tokT0), hs256(tokSecretA)), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"HS512 with the right key", hs512, "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"unknown kid", rawToken(t, map[string]any{"alg": "HS256", "kid": "nope"}, goodClaims("art-1", tokT0), hs256(tokSecretA)), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"no kid", rawToken(t, map[string]any{"alg": "HS256"}, goodClaims("art-1", tokT0), hs256(tokSecretA)), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"kid not a string", rawToken(t, map[string]any{"alg": "HS256", "kid": 7}, goodClaims("art-1", tokT0), hs256(tokSecretA)), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"wrong audience", rawToken(t, map[string]any{"alg": "HS256", "kid": kid}, func() map[string]any {
			c := goodClaims("art-1", tokT0)
			c["aud"] = "someone-else"
			return c
		}(), hs256(tokSecretA)), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"no audience", rawToken(t, map[string]any{"alg": "HS256", "kid": kid}, claimsWithout("aud"), hs256(tokSecretA)), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"no expiry", rawToken(t, map[string]any{"alg": "HS256", "kid": kid}, claimsWithout("exp"), hs256(tokSecretA)), "art-1", tokT0, artifacts.ErrTokenInvalid},
		{"no subject", rawToken(t, map[string]any{"alg": "HS256", "kid": kid}, claimsWithout("sub"), hs256(tokSecretA)), "", tokT0, artifacts.ErrTokenInvalid},
		{"wrong audience and expired", rawToken(t, map[string]any{"alg": "HS256", "kid": kid}, func() map[string]any {
			c := goodClaims("art-1", tokT0)
			c["aud"] = "someone-else"
			return c
		}(), hs256(tokSecretA)), "art-1", tokT0.Add(time.Hour), artifacts.ErrTokenInvalid},
		{"expired", good, "art-1", tokT0.Add(10*time.Minute + 6*time.Second), artifacts.ErrTokenExpired},
		{"forged and expired", forgedPayload(), "art-2", tokT0.Add(time.Hour), artifacts.ErrTokenInvalid},
		{"another artifact", good, "art-2", tokT0, artifacts.ErrTokenWrongArtifact},
		{"another artifact, prefix", good, "art-", tokT0, artifacts.ErrTokenWrongArtifact},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := s.Verify(tt.token, tt.id, tt.now)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %+v, %v; want %v", c, err, tt.want)
			}
			if c != (artifacts.Claims{}) {
				t.Errorf("claims %+v returned with an error", c)
			}
		})
	}
}

func TestVerifyLeeway(t *testing.T) {
	s := tokSigner(t, artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}}, time.Minute)
	tok, exp, _ := s.Sign("a", tokT0)
	if _, err := s.Verify(tok, "a", exp.Add(3*time.Second)); err != nil {
		t.Errorf("3 s past expiry: %v, want accepted within the leeway", err)
	}
	if _, err := s.Verify(tok, "a", exp.Add(time.Minute)); !errors.Is(err, artifacts.ErrTokenExpired) {
		t.Errorf("a minute past expiry: %v, want ErrTokenExpired", err)
	}
}

func TestRotation(t *testing.T) {
	old := tokSigner(t, artifacts.Keys{Current: artifacts.Key{ID: "2024", Secret: tokSecretA}}, 0)
	rotated := tokSigner(t, artifacts.Keys{
		Current:  artifacts.Key{ID: "2025", Secret: tokSecretB},
		Previous: []artifacts.Key{{ID: "2024", Secret: tokSecretA}},
	}, 0)
	dropped := tokSigner(t, artifacts.Keys{Current: artifacts.Key{ID: "2025", Secret: tokSecretB}}, 0)

	before := tokSign(t, old, "a", tokT0)
	after := tokSign(t, rotated, "a", tokT0)

	c, err := rotated.Verify(before, "a", tokT0)
	if err != nil || c.KeyID != "2024" {
		t.Errorf("token from the previous key: %+v, %v; want accepted with kid 2024", c, err)
	}
	if c, err := rotated.Verify(after, "a", tokT0); err != nil || c.KeyID != "2025" {
		t.Errorf("token from the current key: %+v, %v; want kid 2025", c, err)
	}
	if _, err := old.Verify(after, "a", tokT0); !errors.Is(err, artifacts.ErrTokenInvalid) {
		t.Errorf("new token at the old signer: %v, want ErrTokenInvalid (unknown kid)", err)
	}
	if _, err := dropped.Verify(before, "a", tokT0); !errors.Is(err, artifacts.ErrTokenInvalid) {
		t.Errorf("token of a dropped key: %v, want ErrTokenInvalid", err)
	}
}

func TestNewSignerErrors(t *testing.T) {
	tests := []struct {
		name string
		keys artifacts.Keys
		ttl  time.Duration
	}{
		{"no key", artifacts.Keys{}, 0},
		{"short current", artifacts.Keys{Current: artifacts.Key{Secret: []byte("short")}}, 0},
		{"short previous", artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}, Previous: []artifacts.Key{{Secret: tokSecretB[:31]}}}, 0},
		{"same secret twice", artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}, Previous: []artifacts.Key{{Secret: tokSecretA}}}, 0},
		{"same id twice", artifacts.Keys{Current: artifacts.Key{ID: "k", Secret: tokSecretA}, Previous: []artifacts.Key{{ID: "k", Secret: tokSecretB}}}, 0},
		{"negative ttl", artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}}, -time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := artifacts.NewSigner(tt.keys, tt.ttl); err == nil {
				t.Errorf("NewSigner = %v, nil; want an error", s)
			}
		})
	}
	if _, _, err := tokSigner(t, artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}}, 0).Sign("", tokT0); err == nil {
		t.Error("Sign with an empty id succeeded")
	}
}

func TestSignerCopiesSecret(t *testing.T) {
	secret := append([]byte(nil), tokSecretA...)
	s := tokSigner(t, artifacts.Keys{Current: artifacts.Key{ID: "k", Secret: secret}}, 0)
	tok := tokSign(t, s, "a", tokT0)
	secret[0] ^= 0xff
	if _, err := s.Verify(tok, "a", tokT0); err != nil {
		t.Errorf("after the caller changed its slice: %v", err)
	}
}

// FuzzVerify checks that Verify never panics, always classifies its errors,
// and accepts nothing but a token the signer issued, for its own artifact.
func FuzzVerify(f *testing.F) {
	kid := artifacts.KeyID(tokSecretA)
	s := tokSigner(f, artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}}, 0)
	issued := map[string]string{}
	for _, id := range []string{"art-1", "x", "ünï"} {
		tok := tokSign(f, s, id, tokT0)
		issued[tok] = id
		f.Add(tok, id)
		f.Add(tok, id+"x")
	}
	other := tokSigner(f, artifacts.Keys{Current: artifacts.Key{ID: kid, Secret: tokSecretB}}, 0)
	f.Add(tokSign(f, other, "art-1", tokT0), "art-1")
	f.Add(rawToken(f, map[string]any{"alg": "none", "kid": kid}, goodClaims("art-1", tokT0), nil), "art-1")
	f.Add(rawToken(f, map[string]any{"alg": "RS256", "kid": kid}, goodClaims("art-1", tokT0), hs256(tokSecretA)), "art-1")
	f.Add("", "")
	f.Add("..", "a")
	f.Add("e30.e30.", "a")
	f.Fuzz(func(t *testing.T, token, id string) {
		c, err := s.Verify(token, id, tokT0.Add(time.Minute))
		if err != nil {
			if !errors.Is(err, artifacts.ErrTokenInvalid) && !errors.Is(err, artifacts.ErrTokenExpired) &&
				!errors.Is(err, artifacts.ErrTokenWrongArtifact) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if want, ok := issued[token]; !ok || want != id || c.ArtifactID != id {
			t.Fatalf("accepted %q for %q: %+v", token, id, c)
		}
	})
}

// BenchmarkSign signs one download URL: an execution that makes a thousand
// files signs a thousand.
func BenchmarkSign(b *testing.B) {
	s := tokSigner(b, artifacts.Keys{Current: artifacts.Key{Secret: tokSecretA}}, 0)
	now := time.Now()
	for b.Loop() {
		if _, _, err := s.URL("http://localhost:8000", "abcdefghijklmnopqrstuvwxyz", now); err != nil {
			b.Fatal(err)
		}
	}
}
