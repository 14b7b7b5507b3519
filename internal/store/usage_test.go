package store_test

import (
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
)

// TestLiveSessions lists a key prefix's sessions whose end is not
// recorded, in one namespace; paused ones count, ended ones do not.
func TestLiveSessions(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	put := func(ns, id, key string) {
		t.Helper()
		if err := s.PutSession(ctx, store.Session{Namespace: ns, ID: id, Key: key, ContainerID: "c-" + id, Created: at(0), LastUsed: at(0)}); err != nil {
			t.Fatal(err)
		}
	}
	put("ns", "a1", "tA/one")
	put("ns", "a2", "tA/two")
	put("ns", "a3", "tA/three")
	put("ns", "b1", "tB/one")
	put("other", "a1", "tA/one")
	put("ns", "w1", "t_/one")
	if _, err := s.EndSession(ctx, "ns", "a2", "c-a2", at(1), "stopped"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPaused(ctx, "ns", "a3", at(2)); err != nil {
		t.Fatal(err)
	}
	ids := func(prefix string) []string {
		t.Helper()
		list, err := s.LiveSessions(ctx, "ns", prefix)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, sess := range list {
			out = append(out, sess.ID)
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range []struct {
		prefix string
		want   []string
	}{
		{"tA/", []string{"a1", "a3"}},
		{"tB/", []string{"b1"}},
		{"t_/", []string{"w1"}},
		{"tC/", nil},
	} {
		if got := ids(tt.prefix); !slices.Equal(got, tt.want) {
			t.Errorf("LiveSessions(ns, %q) = %v, want %v", tt.prefix, got, tt.want)
		}
	}
}
