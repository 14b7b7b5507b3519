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

// TestEndSessionOfOneContainer: ending a session's container touches that
// container only. A process that saw an old container go must not end the
// container another process started in its place, nor lose the executions
// running there, nor rewrite the reason first recorded.
func TestEndSessionOfOneContainer(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if err := s.PutSession(ctx, store.Session{Namespace: "ns", ID: "sid", Key: "k", ContainerID: "new", Created: at(0), LastUsed: at(0)}); err != nil {
		t.Fatal(err)
	}
	for _, in := range []store.Intent{
		{Namespace: "ns", SessionID: "sid", SessionKey: "k", ExecID: "in-old", CodeSHA256: "a", ContainerID: "old", Started: at(0)},
		{Namespace: "ns", SessionID: "sid", SessionKey: "k", ExecID: "in-new", CodeSHA256: "b", ContainerID: "new", Started: at(time.Second)},
	} {
		if err := s.BeginExecution(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	ended, err := s.EndSession(ctx, "ns", "sid", "old", at(2*time.Second), "lost: removed")
	if err != nil || ended {
		t.Fatalf("end of the old container: ended %v, %v; want the row (of the new one) left alone", ended, err)
	}
	if row, _ := s.Session(ctx, "ns", "sid"); !row.Stopped.IsZero() {
		t.Fatalf("the new container's row was ended: %+v", row)
	}
	if in, _ := s.Intent(ctx, "ns", "sid", "in-new"); in.Lost != "" {
		t.Fatalf("the execution in the new container was lost: %q", in.Lost)
	}
	if in, _ := s.Intent(ctx, "ns", "sid", "in-old"); in.Lost == "" {
		t.Fatal("the execution in the old container is still open")
	}

	if ended, err := s.EndSession(ctx, "ns", "sid", "new", at(3*time.Second), "idle: evicted after 3s unused"); err != nil || !ended {
		t.Fatalf("end of the new container: ended %v, %v", ended, err)
	}
	if in, _ := s.Intent(ctx, "ns", "sid", "in-new"); in.Lost == "" {
		t.Fatal("the execution in the ended container is still open")
	}
	if ended, err := s.EndSession(ctx, "ns", "sid", "new", at(4*time.Second), "lost: removed"); err != nil || ended {
		t.Fatalf("a second end: ended %v, %v; want the first left alone", ended, err)
	}
	if row, _ := s.Session(ctx, "ns", "sid"); row.StopReason != "idle: evicted after 3s unused" || !row.Stopped.Equal(at(3*time.Second)) {
		t.Fatalf("the first end was rewritten: %q at %s", row.StopReason, row.Stopped)
	}
}

// TestEvictSessionAgainstAUse: the sweep's eviction and an execution's
// start are decided in the database, whichever comes first: an execution
// begun after the last use the sweep saw keeps the session, and one that
// begins after the eviction is refused (ErrEnded), so no code runs in a
// container that is about to go.
func TestEvictSessionAgainstAUse(t *testing.T) {
	ctx := context.Background()
	seen := at(time.Second) // the last use the sweep read
	put := func(t *testing.T, s *store.Store, paused time.Time) {
		t.Helper()
		if err := s.PutSession(ctx, store.Session{Namespace: "ns", ID: "sid", Key: "k", ContainerID: "c1", Created: at(0), LastUsed: seen}); err != nil {
			t.Fatal(err)
		}
		if !paused.IsZero() {
			if err := s.SetPaused(ctx, "ns", "sid", paused); err != nil {
				t.Fatal(err)
			}
		}
	}
	begin := func(s *store.Store, id string, started time.Time) error {
		return s.BeginExecution(ctx, store.Intent{Namespace: "ns", SessionID: "sid", SessionKey: "k", ExecID: id, CodeSHA256: "a", ContainerID: "c1", Started: started})
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, s *store.Store)
		want  bool
	}{
		{"idle since", func(t *testing.T, s *store.Store) { put(t, s, time.Time{}) }, true},
		{"an execution began since", func(t *testing.T, s *store.Store) {
			put(t, s, time.Time{})
			if err := begin(s, "new", at(5*time.Second)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"an execution that began before is no use since", func(t *testing.T, s *store.Store) {
			put(t, s, time.Time{})
			if err := begin(s, "old", at(0)); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"used since", func(t *testing.T, s *store.Store) {
			put(t, s, time.Time{})
			if err := s.UseSession(ctx, "ns", "sid", "c1", at(5*time.Second)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"paused", func(t *testing.T, s *store.Store) { put(t, s, at(3*time.Second)) }, false},
		{"replaced", func(t *testing.T, s *store.Store) {
			put(t, s, time.Time{})
			if err := s.PutSession(ctx, store.Session{Namespace: "ns", ID: "sid", Key: "k", ContainerID: "c2", Created: at(0), LastUsed: seen}); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"ended already", func(t *testing.T, s *store.Store) {
			put(t, s, time.Time{})
			if _, err := s.EndSession(ctx, "ns", "sid", "c1", at(2*time.Second), "stopped"); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTest(t)
			tt.setup(t, s)
			got, err := s.EvictSession(ctx, "ns", "sid", "c1", seen, at(10*time.Second), "idle: evicted after 9s unused")
			if err != nil || got != tt.want {
				t.Fatalf("EvictSession = %v, %v; want %v", got, err, tt.want)
			}
			if !got {
				return
			}
			if row, _ := s.Session(ctx, "ns", "sid"); row.StopReason != "idle: evicted after 9s unused" {
				t.Fatalf("row after the eviction: %+v", row)
			}
			if err := begin(s, "late", at(11*time.Second)); !errors.Is(err, store.ErrEnded) {
				t.Fatalf("an execution begun after the eviction: %v, want ErrEnded", err)
			}
			if _, err := s.Intent(ctx, "ns", "sid", "late"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the refused execution left an intent: %v", err)
			}
			if err := s.UseSession(ctx, "ns", "sid", "c1", at(11*time.Second)); !errors.Is(err, store.ErrEnded) {
				t.Fatalf("a command or file operation begun after the eviction: %v, want ErrEnded", err)
			}
			if err := s.UseSession(ctx, "ns", "other", "c1", at(11*time.Second)); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the use of a session with no row: %v, want ErrNotFound", err)
			}
		})
	}
}
