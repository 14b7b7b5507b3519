package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

func TestFacts(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if _, _, err := s.Fact(ctx, "oom"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a fact never set: %v, want ErrNotFound", err)
	}
	t0 := time.UnixMilli(1_700_000_000_000)
	for _, at := range []time.Time{t0, t0.Add(time.Hour)} {
		if err := s.SetFact(ctx, "oom", "refused", at); err != nil {
			t.Fatal(err)
		}
		v, got, err := s.Fact(ctx, "oom")
		if err != nil || v != "refused" || !got.Equal(at) {
			t.Fatalf("Fact = %q, %v, %v; want refused, %v", v, got, err, at)
		}
	}
}
