package session_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/session"
)

func TestIDIsStableAndSafe(t *testing.T) {
	golden := map[string]string{
		// Changing any of these orphans every BIND folder and container
		// on upgrade: the mapping must stay the same across versions.
		"default":   "default-37a8eec1ce19687d",
		"../../etc": "etc-74ccf3c5b4c19a81",
	}
	for key, want := range golden {
		if got := session.ID(key); got != want {
			t.Errorf("ID(%q) = %q, want %q", key, got, want)
		}
	}
	safe := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$`)
	keys := []string{"default", "../../etc", "/", ".", "..", "a b", "ключ 🔑", strings.Repeat("k", 1000),
		"nul\x00byte", "\xff\xfe", "UPPER", "x" + strings.Repeat("-", 50) + "y", "pool_1"}
	seen := map[string]string{}
	for _, k := range keys {
		id := session.ID(k)
		if !safe.MatchString(id) {
			t.Errorf("ID(%q) = %q: not a safe name", k, id)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("keys %q and %q share id %q", k, other, id)
		}
		seen[id] = k
	}
}
