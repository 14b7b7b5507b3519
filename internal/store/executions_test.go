package store_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/kernel"
)

func TestExecutionRoundTrip(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	full := store.Execution{
		Namespace: "team-a", SessionID: "s1", SessionKey: "analysis", ExecID: "x1",
		ExecutionCount: 7,
		Code:           "import math\nmath.pi / 0",
		Stdout:         "before\n",
		Stderr:         "warning: ✓\n",
		Outputs: []kernel.Output{
			{Kind: "display_data", Data: map[string]string{"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}},
			{Kind: "execute_result", Data: map[string]string{"text/plain": "42"}},
		},
		Error: &kernel.Exception{Name: "ZeroDivisionError", Value: "float division by zero",
			Traceback: []string{"Cell In[7], line 2", "ZeroDivisionError: float division by zero"}},
		Started:         at(0),
		Duration:        1234567891 * time.Nanosecond,
		TimedOut:        true,
		Interrupted:     true,
		KernelRestarted: true,
		StateLost:       true,
		Replayed:        true,
		Artifacts:       json.RawMessage(`[ {"path": "out/plot.png", "sha256": "ab12"} ]`),
		TraceID:         "4bf92f3577b34da6a3ce929d0e0e4736",
	}
	bare := store.Execution{Namespace: "team-a", SessionID: "s1", ExecID: "x2", Started: time.Time{}}

	for _, e := range []*store.Execution{&full, &bare} {
		if err := s.RecordExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if full.Seq == 0 || bare.Seq <= full.Seq {
		t.Errorf("Seq = %d, %d, want increasing and non-zero", full.Seq, bare.Seq)
	}
	bare.Artifacts = json.RawMessage("[]") // nil is stored as []

	got, err := s.Executions(ctx, "team-a", "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.Execution{full, bare}; !reflect.DeepEqual(got, want) {
		t.Errorf("Executions:\n got %+v\nwant %+v", got, want)
	}
	one, err := s.Execution(ctx, "team-a", "s1", "x1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one, full) {
		t.Errorf("Execution:\n got %+v\nwant %+v", one, full)
	}
}

func TestExecutionsLimitAndLatest(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	for i, id := range []string{"a", "b", "retry", "c", "retry"} {
		e := &store.Execution{Namespace: "n", SessionID: "s", ExecID: id, ExecutionCount: i + 1}
		if err := s.RecordExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Another session's history stays apart.
	if err := s.RecordExecution(ctx, &store.Execution{Namespace: "n", SessionID: "other", ExecID: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		limit int
		want  []int
	}{
		// The second "retry" is not recorded: an exec id is recorded once.
		{0, []int{1, 2, 3, 4}},
		{-1, []int{1, 2, 3, 4}},
		{2, []int{3, 4}},
		{9, []int{1, 2, 3, 4}},
	} {
		list, err := s.Executions(ctx, "n", "s", tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		var counts []int
		for _, e := range list {
			counts = append(counts, e.ExecutionCount)
		}
		if !reflect.DeepEqual(counts, tt.want) {
			t.Errorf("Executions(limit %d) = %v, want %v", tt.limit, counts, tt.want)
		}
	}
	e, err := s.Execution(ctx, "n", "s", "retry")
	if err != nil {
		t.Fatal(err)
	}
	if e.ExecutionCount != 3 {
		t.Errorf("Execution(retry).ExecutionCount = %d, want 3, the first and only record", e.ExecutionCount)
	}
}

func TestRecordExecutionInvalidArtifacts(t *testing.T) {
	s := openTest(t)
	e := &store.Execution{Namespace: "n", SessionID: "s", ExecID: "x", Artifacts: json.RawMessage(`[{`)}
	if err := s.RecordExecution(t.Context(), e); err == nil {
		t.Error("RecordExecution with invalid artifacts JSON succeeded")
	}
}

func TestCaps(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	s.MaxOutput, s.MaxCode = 10, 20
	big := strings.Repeat("A", 100)
	e := store.Execution{
		Namespace: "n", SessionID: "s", ExecID: "x",
		Code:   strings.Repeat("c", 15) + strings.Repeat("d", 15),
		Stdout: "0123456789",        // exactly the cap: kept whole
		Stderr: "hé✓✓✓ wörld ✓done", // both cuts fall inside a ✓
		Outputs: []kernel.Output{{Kind: "display_data", Data: map[string]string{
			"image/png": big, "text/plain": big, "image/jpeg": "small",
		}}},
	}
	if err := s.RecordExecution(ctx, &e); err != nil {
		t.Fatal(err)
	}
	if e.Outputs[0].Data["image/png"] != big || len(e.Code) != 30 {
		t.Error("RecordExecution changed the caller's Execution")
	}
	got, err := s.Execution(ctx, "n", "s", "x")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("c", 10) + "\n[... 10 bytes cut ...]\n" + strings.Repeat("d", 10); got.Code != want {
		t.Errorf("Code = %q, want %q", got.Code, want)
	}
	if got.Stdout != e.Stdout {
		t.Errorf("Stdout = %q, want it whole", got.Stdout)
	}
	if !strings.Contains(got.Stderr, " bytes cut ...]\n") || !strings.HasPrefix(got.Stderr, "hé\n") ||
		!strings.HasSuffix(got.Stderr, "]\ndone") || !utf8.ValidString(got.Stderr) {
		t.Errorf("Stderr = %q, want head, marker and tail", got.Stderr)
	}
	wantData := map[string]string{
		"image/png":  "[image/png: 100 bytes, not kept in history]",
		"text/plain": big,
		"image/jpeg": "small",
	}
	if !reflect.DeepEqual(got.Outputs[0].Data, wantData) {
		t.Errorf("Outputs data = %v, want %v", got.Outputs[0].Data, wantData)
	}
}

func TestHostileStrings(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	for _, tt := range []struct{ name, v string }{
		{"nul bytes", "a\x00b\x00\x00c"},
		{"invalid utf-8", "\xff\xfe\xc3(\xe2\x82"},
		{"long unicode", strings.Repeat("ключ🔑", 200)},
		{"sql", `'; DROP TABLE sessions; --" OR 1=1`},
		{"empty", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sess := store.Session{Namespace: tt.v, ID: "id" + tt.v, Key: tt.v, ContainerID: tt.v, StopReason: "",
				Created: at(0), LastUsed: at(0)}
			if err := s.PutSession(ctx, sess); err != nil {
				t.Fatal(err)
			}
			if err := s.StopSession(ctx, tt.v, "id"+tt.v, at(time.Second), tt.v); err != nil {
				t.Fatal(err)
			}
			sess.Stopped, sess.StopReason = at(time.Second), tt.v
			got, err := s.Session(ctx, tt.v, "id"+tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, sess) {
				t.Errorf("session:\n got %#v\nwant %#v", got, sess)
			}

			e := store.Execution{Namespace: tt.v, SessionID: "id" + tt.v, SessionKey: tt.v, ExecID: tt.v,
				Code: tt.v, Stdout: tt.v, Stderr: tt.v, Started: at(0), Artifacts: json.RawMessage("[]")}
			if err := s.RecordExecution(ctx, &e); err != nil {
				t.Fatal(err)
			}
			ge, err := s.Execution(ctx, tt.v, "id"+tt.v, tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ge, e) {
				t.Errorf("execution:\n got %#v\nwant %#v", ge, e)
			}
		})
	}
	// The tables are still there.
	if _, err := s.Sessions(ctx, ""); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentRecordExecution(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentbox.db")
	var handles [2]*store.Store
	for i := range handles {
		s, err := store.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		handles[i] = s
	}
	const goroutines, each = 20, 10
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			s := handles[g%2]
			for i := range each {
				e := &store.Execution{Namespace: "n", SessionID: "s", ExecID: fmt.Sprintf("%d-%d", g, i),
					Stdout: strings.Repeat("x", 1000), Started: at(0)}
				if err := s.RecordExecution(ctx, e); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := handles[0].Executions(ctx, "n", "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, e := range list {
		if i > 0 && e.Seq <= list[i-1].Seq {
			t.Errorf("seq %d after %d", e.Seq, list[i-1].Seq)
		}
		seen[e.ExecID] = true
	}
	if len(list) != goroutines*each || len(seen) != goroutines*each {
		t.Errorf("got %d rows, %d distinct, want %d", len(list), len(seen), goroutines*each)
	}
}

func TestRecordExecutionTouchesTheSession(t *testing.T) {
	s := openTest(t)
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.PutSession(t.Context(), store.Session{Namespace: "n", ID: "s", Key: "k", Created: created, LastUsed: created}); err != nil {
		t.Fatal(err)
	}
	started := created.Add(time.Hour)
	e := &store.Execution{Namespace: "n", SessionID: "s", ExecID: "e1", ExecutionCount: 7, Started: started, Duration: time.Second}
	if err := s.RecordExecution(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(t.Context(), "n", "s")
	if err != nil {
		t.Fatal(err)
	}
	if !got.LastUsed.Equal(started.Add(time.Second)) || got.ExecutionCount != 7 {
		t.Fatalf("session after an execution: last used %s, count %d", got.LastUsed, got.ExecutionCount)
	}
	// An older execution recorded late does not move last use back.
	old := &store.Execution{Namespace: "n", SessionID: "s", ExecID: "e0", ExecutionCount: 7, Started: created}
	if err := s.RecordExecution(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Session(t.Context(), "n", "s"); !got.LastUsed.Equal(started.Add(time.Second)) {
		t.Fatalf("last use moved back to %s", got.LastUsed)
	}
}
