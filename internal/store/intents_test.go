package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// TestIntents: an id starts once, in any number of callers; it is open until
// its result is recorded or it is lost, and stays known either way.
func TestIntents(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	in := store.Intent{Namespace: "ns", SessionID: "sid", SessionKey: "k", ExecID: "call-1", CodeSHA256: "abc", ContainerID: "c1", Started: time.Now()}
	if err := s.BeginExecution(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginExecution(ctx, in); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second begin of one id: %v, want ErrExists", err)
	}
	other := in
	other.ExecID = "call-2"
	if err := s.BeginExecution(ctx, other); err != nil {
		t.Fatal(err)
	}
	open, err := s.OpenIntents(ctx, "ns", "sid")
	if err != nil || len(open) != 2 || open[0].ExecID != "call-1" || open[0].CodeSHA256 != "abc" || open[0].ContainerID != "c1" {
		t.Fatalf("open intents: %+v, %v", open, err)
	}
	if err := s.RecordExecution(ctx, &store.Execution{Namespace: "ns", SessionID: "sid", SessionKey: "k", ExecID: "call-1", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.LoseIntents(ctx, "ns", "sid", "", "the container was removed"); err != nil {
		t.Fatal(err)
	}
	if open, _ := s.OpenIntents(ctx, "ns", "sid"); len(open) != 0 {
		t.Fatalf("still open: %+v", open)
	}
	got, err := s.Intent(ctx, "ns", "sid", "call-1")
	if err != nil || !got.Recorded || got.Lost != "" {
		t.Fatalf("recorded intent: %+v, %v (a recorded one is never lost)", got, err)
	}
	got, err = s.Intent(ctx, "ns", "sid", "call-2")
	if err != nil || got.Recorded || got.Lost != "the container was removed" {
		t.Fatalf("lost intent: %+v, %v", got, err)
	}
	if err := s.BeginExecution(ctx, other); !errors.Is(err, store.ErrExists) {
		t.Fatalf("begin of a lost id: %v, want ErrExists", err)
	}
	if _, err := s.Intent(ctx, "ns", "sid", "never"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}
