package tenant

import (
	"strings"
	"testing"
)

// TestGroup: a tenant's quota group is the prefix of every key it makes,
// and no other tenant's key has it.
func TestGroup(t *testing.T) {
	a, b := Tenant{ID: "ta"}, Tenant{ID: "tab"}
	ga, ok := Group(a.SessionKey("x/y"))
	if !ok || ga != "ta/" {
		t.Fatalf("Group(%q) = %q, %v", a.SessionKey("x/y"), ga, ok)
	}
	if gb, _ := Group(b.SessionKey("x")); gb == ga || strings.HasPrefix(b.SessionKey("x"), ga) {
		t.Fatalf("tenant %s's key %q is in tenant %s's group %q", b.ID, b.SessionKey("x"), a.ID, ga)
	}
	for _, key := range []string{"plain", "/lead"} {
		if g, ok := Group(key); ok {
			t.Errorf("Group(%q) = %q, want none", key, g)
		}
	}
}
