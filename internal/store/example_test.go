package store_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

func Example() {
	dir, err := os.MkdirTemp("", "store-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(dir, "agentbox.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	sess := store.Session{Namespace: "team-a", ID: "analysis", Key: "analysis",
		ContainerID: "c0ffee", Created: now, LastUsed: now}
	if err := s.PutSession(ctx, sess); err != nil {
		log.Fatal(err)
	}
	e := &store.Execution{Namespace: "team-a", SessionID: "analysis", SessionKey: "analysis",
		ExecID: "x1", ExecutionCount: 1, Code: "print(6 * 7)", Stdout: "42\n",
		Started: now, Duration: 3 * time.Millisecond}
	if err := s.RecordExecution(ctx, e); err != nil {
		log.Fatal(err)
	}
	if err := s.TouchSession(ctx, "team-a", "analysis", now.Add(time.Second), 1); err != nil {
		log.Fatal(err)
	}

	history, err := s.Executions(ctx, "team-a", "analysis", 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range history {
		fmt.Printf("#%d %s -> %q in %v\n", h.Seq, h.Code, h.Stdout, h.Duration)
	}
	got, err := s.Session(ctx, "team-a", "analysis")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.ExecutionCount, got.LastUsed.Format(time.RFC3339))
	// Output:
	// #1 print(6 * 7) -> "42\n" in 3ms
	// 1 2025-01-02T03:04:06Z
}
