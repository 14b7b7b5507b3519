package store_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// at returns a UTC time t0 + d, with nanoseconds, as stored times read back.
func at(d time.Duration) time.Time {
	return time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC).Add(d)
}

func TestSessionLifecycle(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	want := store.Session{
		Namespace: "team-a", ID: "s1", Key: "analysis",
		ContainerID: "c0ffee", Image: "agentbox-sandbox:1", Storage: "/srv/sessions/s1",
		Created: at(0), LastUsed: at(time.Second), ExecutionCount: 0,
		Limits: map[string]string{"memory": "512m", "cpus": "1", "pids": "256"},
	}
	if err := s.PutSession(ctx, want); err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		got, err := s.Session(ctx, "team-a", "s1")
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", step, got, want)
		}
	}
	check("put")

	if err := s.TouchSession(ctx, "team-a", "s1", at(time.Minute), 3); err != nil {
		t.Fatal(err)
	}
	want.LastUsed, want.ExecutionCount = at(time.Minute), 3
	check("touch")

	if err := s.StopSession(ctx, "team-a", "s1", at(time.Hour), "idle"); err != nil {
		t.Fatal(err)
	}
	want.Stopped, want.StopReason = at(time.Hour), "idle"
	check("stop")

	// A re-put records the session as running again, whatever it is given.
	want.ContainerID, want.Stopped, want.StopReason = "beef", time.Time{}, ""
	again := want
	again.Stopped, again.StopReason = at(2*time.Hour), "ignored"
	if err := s.PutSession(ctx, again); err != nil {
		t.Fatal(err)
	}
	check("re-put")

	// Times in another zone, and without a fraction, read back equal in UTC.
	local := time.Date(2025, 3, 4, 7, 6, 7, 0, time.FixedZone("X", 2*3600))
	if err := s.TouchSession(ctx, "team-a", "s1", local, 4); err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(ctx, "team-a", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.LastUsed.Equal(local) || got.LastUsed.Location() != time.UTC {
		t.Errorf("LastUsed = %v, want %v in UTC", got.LastUsed, local)
	}
}

func TestSessionsList(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	for _, sess := range []store.Session{
		{Namespace: "a", ID: "old", Key: "old", LastUsed: at(1 * time.Second)},
		{Namespace: "a", ID: "new", Key: "new", LastUsed: at(3 * time.Second)},
		{Namespace: "b", ID: "mid", Key: "mid", LastUsed: at(2 * time.Second)},
		// Sorting as text must not put 10.5s before 10s: the fraction is fixed width.
		{Namespace: "b", ID: "whole", Key: "whole", LastUsed: time.Date(2025, 3, 4, 5, 6, 10, 0, time.UTC)},
		{Namespace: "b", ID: "frac", Key: "frac", LastUsed: time.Date(2025, 3, 4, 5, 6, 10, 500, time.UTC)},
	} {
		if err := s.PutSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StopSession(ctx, "a", "old", at(time.Hour), "stopped"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		ns   string
		want []string
	}{
		{"a", []string{"new", "old"}},
		{"b", []string{"frac", "whole", "mid"}},
		{"", []string{"new", "frac", "whole", "mid", "old"}},
		{"none", nil},
	} {
		list, err := s.Sessions(ctx, tt.ns)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, sess := range list {
			ids = append(ids, sess.ID)
		}
		if !reflect.DeepEqual(ids, tt.want) {
			t.Errorf("Sessions(%q) = %v, want %v", tt.ns, ids, tt.want)
		}
	}
}

func TestNotFound(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	if err := s.PutSession(ctx, store.Session{Namespace: "a", ID: "s1", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordExecution(ctx, &store.Execution{Namespace: "a", SessionID: "s1", ExecID: "x1"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"session other id", func() error { _, err := s.Session(ctx, "a", "s2"); return err }},
		{"session other namespace", func() error { _, err := s.Session(ctx, "b", "s1"); return err }},
		{"touch", func() error { return s.TouchSession(ctx, "a", "s2", at(0), 1) }},
		{"stop", func() error { return s.StopSession(ctx, "b", "s1", at(0), "idle") }},
		{"execution other exec id", func() error { _, err := s.Execution(ctx, "a", "s1", "x2"); return err }},
		{"execution other session", func() error { _, err := s.Execution(ctx, "a", "s2", "x1"); return err }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("err = %v, want ErrNotFound", err)
			}
		})
	}
	if err := s.PutSession(ctx, store.Session{Namespace: "a", Key: "k"}); err == nil {
		t.Error("PutSession with an empty id succeeded")
	}
}
