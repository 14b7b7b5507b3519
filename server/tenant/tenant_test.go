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

// TestServes: a tenant is served while its key is configured; Local only
// by a server without keys.
func TestServes(t *testing.T) {
	k := NewKeys([]string{"alpha", "beta"})
	a, _ := k.Lookup("alpha")
	b, _ := k.Lookup("beta")
	onlyB := NewKeys([]string{"beta"})
	for _, c := range []struct {
		name string
		keys *Keys
		t    Tenant
		want bool
	}{
		{"a key's tenant", k, a, true},
		{"its key removed", onlyB, a, false},
		{"the remaining key", onlyB, b, true},
		{"Local with keys", k, Local, false},
		{"Local without keys", NewKeys(nil), Local, true},
		{"Local, nil keys", nil, Local, true},
		{"a key's tenant without keys", NewKeys(nil), a, false},
		{"a key's tenant, nil keys", nil, a, false},
		{"the zero Keys", &Keys{}, Local, true},
		{"empty tenant", k, Tenant{}, false},
	} {
		if got := c.keys.Serves(c.t); got != c.want {
			t.Errorf("%s: Serves(%q) = %v, want %v", c.name, c.t.ID, got, c.want)
		}
	}
}
