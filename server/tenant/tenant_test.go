package tenant

import (
	"context"
	"errors"
	"testing"
)

func TestKeys(t *testing.T) {
	k := NewKeys([]string{"alpha", " ", "beta "})
	if k.Len() != 2 {
		t.Fatalf("Len %d, want 2 (the blank one skipped)", k.Len())
	}
	a, err := k.Lookup("alpha")
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.Lookup("beta")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID || a.ID == "" {
		t.Fatalf("tenants %q and %q", a.ID, b.ID)
	}
	for _, c := range []struct {
		key  string
		want error
	}{{"", ErrNoKey}, {"gamma", ErrBadKey}, {"alph", ErrBadKey}, {"alpha ", ErrBadKey}} {
		if _, err := k.Lookup(c.key); !errors.Is(err, c.want) {
			t.Errorf("Lookup(%q): %v, want %v", c.key, err, c.want)
		}
	}
	if got, _ := k.Lookup("alpha"); got != a {
		t.Errorf("the same key gave %v then %v", a, got)
	}
}

func TestSessionKeys(t *testing.T) {
	a, b := Tenant{ID: "ta"}, Tenant{ID: "tb"}
	key := a.SessionKey("box-1")
	if name, ok := a.Name(key); !ok || name != "box-1" {
		t.Fatalf("Name(%q) = %q, %v", key, name, ok)
	}
	for _, other := range []string{b.SessionKey("box-1"), "box-1", "ta", "ta/", "tab/box-1"} {
		if name, ok := a.Name(other); ok {
			t.Errorf("tenant ta owns %q (name %q)", other, name)
		}
	}
	ctx := With(context.Background(), a)
	if got, ok := From(ctx); !ok || got != a {
		t.Fatalf("From: %v %v", got, ok)
	}
	if _, ok := From(context.Background()); ok {
		t.Fatal("a bare context has a tenant")
	}
}

func TestTokens(t *testing.T) {
	k := NewTokens([]byte("0123456789abcdef0123456789abcdef"))
	a, b := Tenant{ID: "ta"}, Tenant{ID: "tb"}
	tok := k.Issue(a, "box-1")
	if got, err := k.Verify(tok, "box-1"); err != nil || got != a {
		t.Fatalf("Verify own token: %v %v", got, err)
	}
	other := NewTokens([]byte("another secret, another server.."))
	bad := []struct{ name, token, sandbox string }{
		{"another sandbox", tok, "box-2"},
		{"another tenant's name on it", "tb" + tok[len("ta"):], "box-1"},
		{"another tenant's token", k.Issue(b, "box-1")[:3] + "x", "box-1"},
		{"another server's token", other.Issue(a, "box-1"), "box-1"},
		{"empty", "", "box-1"},
		{"no dot", "tabox", "box-1"},
		{"no tenant", "." + tok[len("ta."):], "box-1"},
	}
	for _, c := range bad {
		if _, err := k.Verify(c.token, c.sandbox); !errors.Is(err, ErrBadToken) {
			t.Errorf("%s: %v, want ErrBadToken", c.name, err)
		}
	}
	if _, err := (Tokens{}).Verify(Tokens{}.Issue(a, "box-1"), "box-1"); !errors.Is(err, ErrBadToken) {
		t.Errorf("tokens without a secret verify: %v", err)
	}
}
