package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkHotPath prices the durable writes of one execution through a
// Manager: the intent written before the code runs, and the history record
// (with the session's last use) written after it.
func BenchmarkHotPath(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "a.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const ns, sid = "ns", "sid"
	if err := s.PutSession(ctx, Session{Namespace: ns, ID: sid, Key: "k", ContainerID: "c", Created: time.Now(), LastUsed: time.Now()}); err != nil {
		b.Fatal(err)
	}
	n := 0 // ids stay unique across the runs of each sub-benchmark
	b.Run("intent", func(b *testing.B) {
		for range b.N {
			n++
			if err := s.BeginExecution(ctx, Intent{Namespace: ns, SessionID: sid, SessionKey: "k", ExecID: fmt.Sprint("i", n), CodeSHA256: "x", Code: "pass", ContainerID: "c", Owner: "o", Started: time.Now()}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("record", func(b *testing.B) {
		for i := range b.N {
			n++
			if err := s.RecordExecution(ctx, &Execution{Namespace: ns, SessionID: sid, SessionKey: "k", ExecID: fmt.Sprint("r", n), ExecutionCount: i, Code: "pass", Started: time.Now()}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
