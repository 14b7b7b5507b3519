package tenant

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// clock is a settable clock for tokens.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestTokens: a token opens its own sandbox's incarnation, for its TTL,
// and nothing else.
func TestTokens(t *testing.T) {
	now := &clock{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	k := NewTokens(testSecret, WithTokenTTL(time.Hour), WithTokenClock(now.now))
	a, b := Tenant{ID: "ta"}, Tenant{ID: "tb"}
	tok := k.Issue(a, "box-1", "container-1")
	c, err := k.Verify(tok, "box-1")
	if err != nil || c.Tenant != a || !c.Expires.Equal(now.t.Add(time.Hour)) {
		t.Fatalf("Verify own token: %+v %v", c, err)
	}
	if !c.Opens("container-1") {
		t.Error("the token does not open the incarnation it was issued for")
	}
	for _, other := range []string{"container-2", "", "container-1 ", "Container-1"} {
		if c.Opens(other) {
			t.Errorf("the token of container-1 opens %q", other)
		}
	}
	if c, err := k.Verify(k.Issue(a, "box-1", ""), "box-1"); err != nil || c.Opens("") {
		t.Errorf("a token of no nonce: %v, opens the empty nonce %v", err, c.Opens(""))
	}

	parts := strings.Split(tok, ".")
	if len(parts) != 4 {
		t.Fatalf("token %q: want tenant.expiry.tag.mac", tok)
	}
	join := func(p ...string) string { return strings.Join(p, ".") }
	otherSecret := NewTokens([]byte("another secret, another server.."), WithTokenClock(now.now))
	tokB := k.Issue(b, "box-1", "container-1")
	bad := []struct{ name, token, sandbox string }{
		{"another sandbox", tok, "box-2"},
		{"another tenant's name on it", join("tb", parts[1], parts[2], parts[3]), "box-1"},
		{"another tenant's mac on it", join("ta", parts[1], parts[2], strings.Split(tokB, ".")[3]), "box-1"},
		{"another server's token", otherSecret.Issue(a, "box-1", "container-1"), "box-1"},
		{"a later expiry", join(parts[0], "9"+parts[1], parts[2], parts[3]), "box-1"},
		{"another nonce tag", join(parts[0], parts[1], nonceTag("container-2"), parts[3]), "box-1"},
		{"truncated mac", tok[:len(tok)-1], "box-1"},
		{"truncated to three fields", join(parts[0], parts[1], parts[2]), "box-1"},
		{"a fifth field", tok + ".x", "box-1"},
		{"the old format", "ta." + parts[3], "box-1"},
		{"empty", "", "box-1"},
		{"no dot", "tabox", "box-1"},
		{"no tenant", join("", parts[1], parts[2], parts[3]), "box-1"},
		{"no expiry", join(parts[0], "", parts[2], parts[3]), "box-1"},
		{"no tag", join(parts[0], parts[1], "", parts[3]), "box-1"},
		{"padded mac", tok + "=", "box-1"},
		{"huge", tok + strings.Repeat("A", 1<<20), "box-1"},
	}
	for _, c := range bad {
		if _, err := k.Verify(c.token, c.sandbox); !errors.Is(err, ErrBadToken) {
			t.Errorf("%s: %v, want ErrBadToken", c.name, err)
		}
	}
	if _, err := (Tokens{}).Verify(Tokens{}.Issue(a, "box-1", "container-1"), "box-1"); !errors.Is(err, ErrBadToken) {
		t.Errorf("tokens without a secret verify: %v", err)
	}
}

// TestTokenExpiry: a token works until its TTL is up, then says it
// expired (and when); a token issued later works again.
func TestTokenExpiry(t *testing.T) {
	now := &clock{time.Unix(1_800_000_000, 0)}
	k := NewTokens(testSecret, WithTokenTTL(2*time.Hour), WithTokenClock(now.now))
	tok := k.Issue(Local, "box-1", "c1")
	now.t = now.t.Add(2*time.Hour - time.Second)
	if _, err := k.Verify(tok, "box-1"); err != nil {
		t.Fatalf("a second before expiry: %v", err)
	}
	now.t = now.t.Add(time.Second)
	c, err := k.Verify(tok, "box-1")
	if !errors.Is(err, ErrTokenExpired) || !c.Expires.Equal(now.t) || c.Tenant != Local {
		t.Fatalf("at expiry: %+v %v, want ErrTokenExpired with the claims", c, err)
	}
	if _, err := k.Verify(k.Issue(Local, "box-1", "c1"), "box-1"); err != nil {
		t.Errorf("a token issued now: %v", err)
	}
	// Another server's clock or secret does not matter to the default.
	if d := NewTokens(testSecret).TTL(); d != DefaultTokenTTL {
		t.Errorf("default TTL %v, want %v", d, DefaultTokenTTL)
	}
	if d := NewTokens(testSecret, WithTokenTTL(0)).TTL(); d != DefaultTokenTTL {
		t.Errorf("TTL 0 gives %v, want the default", d)
	}
}

// FuzzVerify: no input panics Verify, and what verifies is exactly a
// token that was issued (no second spelling of one).
func FuzzVerify(f *testing.F) {
	now := &clock{time.Unix(1_800_000_000, 0)}
	k := NewTokens(testSecret, WithTokenClock(now.now))
	issued := map[string]bool{}
	for _, s := range []struct{ tenant, sandbox, nonce string }{
		{"ta", "box-1", "c1"}, {"local", "b", ""}, {"t0123456789abcdef", "sbx.with.dots", "c2"},
	} {
		tok := k.Issue(Tenant{ID: s.tenant}, s.sandbox, s.nonce)
		issued[tok+"\x00"+s.sandbox] = true
		f.Add(tok, s.sandbox)
	}
	f.Add("", "")
	f.Add("a.b.c.d", "x")
	f.Add("ta.-1.x.y", "box-1")
	f.Fuzz(func(t *testing.T, token, sandbox string) {
		c, err := k.Verify(token, sandbox)
		if err == nil && !issued[token+"\x00"+sandbox] {
			t.Fatalf("Verify(%q, %q) accepted a token never issued: %+v", token, sandbox, c)
		}
	})
}

// BenchmarkAuthenticate is what execd does per request before the
// Manager's Info: verify the token, check its tenant is served, compare
// its nonce with the sandbox's container id.
func BenchmarkAuthenticate(b *testing.B) {
	keys := NewKeys([]string{"key-a-0123456789abcdef", "key-b-0123456789abcdef"})
	a, _ := keys.Lookup("key-a-0123456789abcdef")
	k := NewTokens(testSecret)
	const cid = "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b"
	tok := k.Issue(a, "sbx-0123456789", cid)
	b.ReportAllocs()
	for b.Loop() {
		c, err := k.Verify(tok, "sbx-0123456789")
		if err != nil || !keys.Serves(c.Tenant) || !c.Opens(cid) {
			b.Fatal("refused")
		}
	}
}
