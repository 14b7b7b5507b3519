package session_test

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// storedNames returns the names of the artifacts of key.
func storedNames(t *testing.T, m *session.Manager, key string) map[string]bool {
	t.Helper()
	arts, err := m.Artifacts(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, a := range arts {
		names[a.Name] = true
	}
	return names
}

// dbConn opens a connection of its own to the database at path, as another
// process would, to hold its write lock.
func dbConn(t *testing.T, path string) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestDatabaseLockedIsNeverSilent: another process holds the database's
// write lock, longer than the store waits for it, while an execution runs.
// The result comes back saying that its file could not be stored. Its
// history row is written after the result returns; that fails too, and
// the session's next call, once the lock is released, writes the row,
// stores the file and says so in its result. Nothing is dropped. Before
// (issue 17), the execution returned without a word and without its
// history row, and the file was never stored.
func TestDatabaseLockedIsNeverSilent(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	var logs syncBuffer
	m := managerFor(t, cfg, ns, session.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	mustExec(t, m, "k", "x = 1")

	conn := dbConn(t, cfg.ArtifactsDB)
	locked := make(chan struct{})
	code := "import time\nprint('go', flush=True)\ntime.sleep(1)\nopen('/session/artifacts/report.csv', 'w').write('a,b\\n')"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := m.Exec(ctx, "k", code, session.ExecID("call-1"), session.OnEvent(func(e kernel.Event) {
		if e.Type == kernel.EventStream && strings.Contains(e.Text, "go") {
			if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
				t.Errorf("lock the database: %v", err)
			}
			close(locked)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-locked:
	default:
		t.Fatalf("the code's output never came: %+v", res)
	}
	if len(res.Artifacts) != 0 || len(res.SkippedArtifacts) != 1 || !strings.Contains(res.SkippedArtifacts[0].Reason, "locked") {
		t.Fatalf("artifacts %+v, skipped %+v: want report.csv skipped, the lock named", res.Artifacts, res.SkippedArtifacts)
	}
	// The row, written after the result returned, fails in its turn.
	waitFor(t, "failed history row in the log", func() bool {
		return strings.Contains(logs.String(), "record execution") && strings.Contains(logs.String(), "exec_id=call-1")
	})
	if n := history(t, cfg, ns, "k", "call-1"); n != 0 {
		t.Fatalf("recorded %d times while locked?", n)
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	next := mustExec(t, m, "k", "y = 2")
	if w := strings.Join(next.Warnings, "\n"); !strings.Contains(w, "recorded execution call-1 only now") || !strings.Contains(w, "locked") {
		t.Fatalf("the next result does not say the history row of call-1 was late, and why: %q", next.Warnings)
	}
	if n := history(t, cfg, ns, "k", "call-1"); n != 1 {
		t.Fatalf("the held-back execution is recorded %d times after the lock cleared, want once", n)
	}
	if !storedNames(t, m, "k")["report.csv"] {
		t.Fatal("report.csv not stored after the lock cleared")
	}
	if again := mustExec(t, m, "k", "z = 3"); len(again.Warnings) != 0 {
		t.Fatalf("warnings once all was recorded: %v", again.Warnings)
	}
	if res, err := m.Exec(ctx, "k", code, session.ExecID("call-1")); err != nil || !res.Replayed {
		t.Fatalf("the id after recovery: %+v, %v", res, err)
	}
}

// TestFullDiskIsNamed: the disk holding the blobstore and the database
// fills up (a small filesystem made for the test). The caller is told that
// the server's disk is full, never where (the host path is the operator's
// business, and a server's tenants read these messages: issue 23 row 10);
// what was stored before stays; once room is made, the file is stored and
// the history row written.
func TestFullDiskIsNamed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot make a small filesystem (root needed): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	cfg := testConfig(t, func(c *config.Config) {
		c.ArtifactsDB = filepath.Join(dir, "artifacts.db")
		c.BlobstoreDir = filepath.Join(dir, "blobstore")
		// A disk full all the same (TestArtifactsKeepReserve has the
		// reserve that comes first).
		c.DiskReserveMB = 0
	})
	ns := namespace()
	m := managerFor(t, cfg, ns)
	mustExec(t, m, "k", "open('/session/artifacts/before.txt', 'w').write('kept')")

	// Fill the disk, leaving less than the next artifact needs.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	// Room for the database's small writes, not for the artifact.
	if fi, err := f.Stat(); err == nil {
		f.Truncate(fi.Size() - 512<<10)
	}
	f.Close()
	res := mustExec(t, m, "k", "open('/session/artifacts/big.bin', 'wb').write(b'x' * (2 << 20))", session.ExecID("call-1"))
	all := strings.Join(res.Warnings, "\n")
	for _, s := range res.SkippedArtifacts {
		all += "\n" + s.Reason
	}
	if !strings.Contains(all, "the server's disk is full") {
		t.Fatalf("the full disk is not named: warnings %q, skipped %+v", res.Warnings, res.SkippedArtifacts)
	}
	if strings.Contains(all, dir) {
		t.Fatalf("a host path is shown to the caller: warnings %q, skipped %+v", res.Warnings, res.SkippedArtifacts)
	}
	if storedNames(t, m, "k")["big.bin"] {
		t.Fatal("big.bin stored on a full disk?")
	}
	os.Remove(filler)
	mustExec(t, m, "k", "z = 3")
	names := storedNames(t, m, "k")
	if !names["big.bin"] || !names["before.txt"] {
		t.Fatalf("after room was made: stored %v, want before.txt and big.bin", names)
	}
	if n := history(t, cfg, ns, "k", "call-1"); n != 1 {
		t.Fatalf("call-1 recorded %d times, want once", n)
	}
}

// TestFailedStartLeavesNothing: a session whose start cannot be recorded
// (another process holds the database's write lock past the store's wait)
// fails with the cause, and leaves no container behind. Before, the
// container kept running, known to no manager.
func TestFailedStartLeavesNothing(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, nil)
	ns := namespace()
	m := managerFor(t, cfg, ns)
	conn := dbConn(t, cfg.ArtifactsDB)
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := m.Exec(ctx, "new", "x = 1"); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("start with the database locked: %v, want the lock named", err)
	}
	list, err := dockertest.Engine(t).ListContainers(context.Background(), session.LabelNamespace+"="+ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("a failed start left %d containers", len(list))
	}
	conn.ExecContext(context.Background(), "ROLLBACK")
	mustExec(t, m, "new", "x = 1")
}
