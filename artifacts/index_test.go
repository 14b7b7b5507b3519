package artifacts_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/internal/store"
)

// openStore opens a new database in a temporary directory, closed at cleanup.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMigration(t *testing.T) {
	s := openStore(t)
	var v int
	if err := s.DB().QueryRowContext(t.Context(), `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil || v < 2 {
		t.Fatalf("schema version %d, %v; want at least 2", v, err)
	}
	rows, err := s.DB().QueryContext(t.Context(), `SELECT name FROM pragma_index_list('artifacts')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	for _, want := range []string{"artifacts_session_name_sha256", "artifacts_sha256"} {
		if !slices.Contains(names, want) {
			t.Errorf("indexes %v lack %s", names, want)
		}
	}
	// Dropped by migration 4: it slowed every ingestion for the sake of
	// Prune, which scans instead.
	if slices.Contains(names, "artifacts_created") {
		t.Errorf("indexes %v still hold artifacts_created", names)
	}
}

// TestMigrationUpgrade opens a file made before migration 2, with sessions
// history in it, as an upgraded binary does.
func TestMigrationUpgrade(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentbox.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordExecution(ctx, &store.Execution{Namespace: "ns", SessionID: "s", ExecID: "x"}); err != nil {
		t.Fatal(err)
	}
	// Back to version 1.
	if _, err := s.DB().ExecContext(ctx, `DROP TABLE artifacts; DROP TABLE dataset_cache; DROP TABLE dataset_status; DROP TABLE intents;
		ALTER TABLE sessions DROP COLUMN expires; ALTER TABLE sessions DROP COLUMN paused; ALTER TABLE sessions DROP COLUMN pause_reason;
		ALTER TABLE executions DROP COLUMN kind; ALTER TABLE executions DROP COLUMN exit_code; ALTER TABLE executions DROP COLUMN trace_id;
		DELETE FROM schema_migrations WHERE version >= 2`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := artifacts.NewIndex(s).Add(ctx, artifacts.Artifact{Namespace: "ns", SessionID: "s",
		Name: "a", SHA256: sum(nil)}); err != nil {
		t.Errorf("Add after upgrade: %v", err)
	}
	if _, err := s.Execution(ctx, "ns", "s", "x"); err != nil {
		t.Errorf("history lost in the upgrade: %v", err)
	}
}

func TestDedupAcrossSessions(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	bs := artifacts.NewBlobstore(dir)
	ix := artifacts.NewIndex(openStore(t))
	var rows []artifacts.Artifact
	for _, sess := range []string{"s1", "s2"} {
		sha, size, err := bs.Put(ctx, strings.NewReader("x,y\n1,2\n"))
		if err != nil {
			t.Fatal(err)
		}
		a, err := ix.Add(ctx, artifacts.Artifact{Namespace: "ns", SessionID: sess, SessionKey: "key-" + sess,
			Name: "data.csv", SHA256: sha, Size: size, MIME: "text/csv"})
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, a)
	}
	if blobs, _ := files(t, dir); len(blobs) != 1 {
		t.Errorf("blobs %v, want one", blobs)
	}
	if rows[0].ID == rows[1].ID || rows[0].SHA256 != rows[1].SHA256 {
		t.Errorf("rows %+v, want two ids, one sha256", rows)
	}
	for _, a := range rows {
		got, err := ix.Get(ctx, a.ID)
		if err != nil || got != a {
			t.Errorf("Get(%s) = %+v, %v; want %+v", a.ID, got, err, a)
		}
	}
}

func TestAdd(t *testing.T) {
	ctx := t.Context()
	ix := artifacts.NewIndex(openStore(t))
	sha := sum([]byte("v1"))
	a, err := ix.Add(ctx, artifacts.Artifact{Namespace: "ns", SessionID: "s", Name: "a.txt", SHA256: sha, Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.ID) != 26 || strings.ToLower(a.ID) != a.ID || a.Created.IsZero() || a.Created.Location() != time.UTC {
		t.Errorf("Add = %+v; want a 26-character lowercase ID and a UTC Created", a)
	}
	if time.Since(a.Created) > time.Minute {
		t.Errorf("Created = %v, want now", a.Created)
	}
	again, err := ix.Add(ctx, artifacts.Artifact{Namespace: "ns", SessionID: "s", Name: "a.txt", SHA256: sha, Size: 2})
	if err != nil || again.ID != a.ID || again.Created.Before(a.Created) {
		t.Errorf("Add again = %+v, %v; want the row %s", again, err, a.ID)
	}
	if list, _ := ix.BySession(ctx, "ns", "s"); len(list) != 1 {
		t.Errorf("BySession = %+v, want one row", list)
	}

	for _, bad := range []artifacts.Artifact{
		{Namespace: "ns", SessionID: "", Name: "a", SHA256: sha},
		{Namespace: "ns", SessionID: "s", Name: "", SHA256: sha},
		{Namespace: "ns", SessionID: "s", Name: "a\x00b", SHA256: sha},
		{Namespace: "ns", SessionID: "s", Name: "a", SHA256: "../../etc/passwd"},
		{Namespace: "ns", SessionID: "s", Name: "a", SHA256: sha, Size: -1},
	} {
		if _, err := ix.Add(ctx, bad); err == nil {
			t.Errorf("Add(%+v) succeeded, want an error", bad)
		}
	}
}

func TestGetUnknown(t *testing.T) {
	ix := artifacts.NewIndex(openStore(t))
	for _, id := range []string{"", "nope", "' OR 1=1 --"} {
		if _, err := ix.Get(t.Context(), id); !errors.Is(err, artifacts.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
		}
	}
	if _, err := ix.ByName(t.Context(), "ns", "s", "x"); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("ByName(unknown) = %v, want ErrNotFound", err)
	}
}

func TestVersions(t *testing.T) {
	ctx := t.Context()
	ix := artifacts.NewIndex(openStore(t))
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	add := func(name, content string, at time.Duration) artifacts.Artifact {
		t.Helper()
		a, err := ix.Add(ctx, artifacts.Artifact{Namespace: "ns", SessionID: "s", Name: name,
			SHA256: sum([]byte(content)), Size: int64(len(content)), Created: t0.Add(at)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	v1 := add("plot.png", "v1", 0)
	add("plot.png", "v2", time.Second)
	add("table.csv", "t", 2*time.Second)
	// Back to the first content: the same row, now the latest version.
	v1again := add("plot.png", "v1", 3*time.Second)
	if v1again.ID != v1.ID || !v1again.Created.Equal(t0.Add(3*time.Second)) {
		t.Errorf("re-add = %+v, want row %s with Created moved forward", v1again, v1.ID)
	}
	// An older re-add does not move it back.
	if a := add("plot.png", "v1", -time.Hour); !a.Created.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("older re-add moved Created to %v", a.Created)
	}

	latest, err := ix.Latest(ctx, "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"plot.png": sum([]byte("v1")), "table.csv": sum([]byte("t"))}
	if len(latest) != len(want) || latest["plot.png"] != want["plot.png"] || latest["table.csv"] != want["table.csv"] {
		t.Errorf("Latest = %v, want %v", latest, want)
	}
	if a, err := ix.ByName(ctx, "ns", "s", "plot.png"); err != nil || a.ID != v1.ID {
		t.Errorf("ByName = %+v, %v; want row %s", a, err, v1.ID)
	}
	list, err := ix.BySession(ctx, "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, a := range list {
		order = append(order, a.Name)
	}
	if !slices.Equal(order, []string{"plot.png", "table.csv", "plot.png"}) {
		t.Errorf("BySession order %v, want newest first", order)
	}
	if other, err := ix.BySession(ctx, "other", "s"); err != nil || len(other) != 0 {
		t.Errorf("BySession(other namespace) = %v, %v; want none", other, err)
	}
}

func TestHostileNames(t *testing.T) {
	ctx := t.Context()
	ix := artifacts.NewIndex(openStore(t))
	names := []string{
		"with space.csv",
		`quotes ' and " and ''`,
		"new\nline\r\n.txt",
		"ünïcødé/数据/😀.json",
		"'); DROP TABLE artifacts; --",
		"%_*?[]\\",
		"../../etc/passwd",
		"\xff\xfe not utf-8",
		strings.Repeat("n", 255),
		strings.Repeat("é", 127) + "x", // 255 bytes
	}
	for i, name := range names {
		content := []byte(name)
		a, err := ix.Add(ctx, artifacts.Artifact{Namespace: "ns'", SessionID: "s\n", Name: name,
			SHA256: sum(content), Size: int64(len(content))})
		if err != nil {
			t.Fatalf("Add(%q): %v", name, err)
		}
		got, err := ix.ByName(ctx, "ns'", "s\n", name)
		if err != nil || got.ID != a.ID || got.Name != name {
			t.Errorf("%d: ByName(%q) = %+v, %v; want row %s", i, name, got, err, a.ID)
		}
		if byID, err := ix.Get(ctx, a.ID); err != nil || !bytes.Equal([]byte(byID.Name), content) {
			t.Errorf("%d: Get name %q, %v; want %q", i, byID.Name, err, name)
		}
	}
	latest, err := ix.Latest(ctx, "ns'", "s\n")
	if err != nil || len(latest) != len(names) {
		t.Errorf("Latest has %d names, %v; want %d", len(latest), err, len(names))
	}
	for _, name := range names {
		if latest[name] != sum([]byte(name)) {
			t.Errorf("Latest[%q] = %q", name, latest[name])
		}
	}
	// A prefix or pattern matches nothing: names are compared exactly.
	if _, err := ix.ByName(ctx, "ns'", "s\n", "with%"); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("ByName(pattern) = %v, want ErrNotFound", err)
	}
}

func TestAddAllIsOneTransaction(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ix := artifacts.NewIndex(st)
	sha := strings.Repeat("ab", 32)
	good := artifacts.Artifact{Namespace: "n", SessionID: "s", Name: "a.txt", SHA256: sha, Size: 1}
	bad := artifacts.Artifact{Namespace: "n", SessionID: "s", Name: "b.txt", SHA256: "not-a-sha", Size: 1}
	if _, err := ix.AddAll(t.Context(), []artifacts.Artifact{good, bad}); err == nil {
		t.Fatal("AddAll with a bad row worked")
	}
	if list, _ := ix.BySession(t.Context(), "n", "s"); len(list) != 0 {
		t.Fatalf("a failed AddAll left rows: %+v", list)
	}
	good2 := good
	good2.Name = "b.txt"
	got, err := ix.AddAll(t.Context(), []artifacts.Artifact{good, good2})
	if err != nil || len(got) != 2 || got[0].ID == "" || got[0].ID == got[1].ID {
		t.Fatalf("AddAll: %+v %v", got, err)
	}
	if list, _ := ix.BySession(t.Context(), "n", "s"); len(list) != 2 {
		t.Fatalf("rows: %+v", list)
	}
}

// TestAddAllOrderAndDuplicates: rows come back in the list's order, across
// statement chunks, with duplicates in the list and rows stored already.
func TestAddAllOrderAndDuplicates(t *testing.T) {
	ix := artifacts.NewIndex(openStore(t))
	row := func(i int) artifacts.Artifact {
		return artifacts.Artifact{Namespace: "n", SessionID: "s", Name: fmt.Sprintf("f%03d", i%170), SHA256: sum(fmt.Appendf(nil, "%d", i%170)), Size: int64(i % 170)}
	}
	first, err := ix.Add(t.Context(), row(5))
	if err != nil {
		t.Fatal(err)
	}
	var list []artifacts.Artifact
	for i := range 250 { // 80 repeat an earlier one; row 5 exists already
		list = append(list, row(i))
	}
	got, err := ix.AddAll(t.Context(), list)
	if err != nil || len(got) != len(list) {
		t.Fatalf("AddAll: %d rows, %v", len(got), err)
	}
	ids := map[string]string{}
	for i, a := range got {
		if a.Name != list[i].Name || a.SHA256 != list[i].SHA256 || a.ID == "" {
			t.Fatalf("row %d = %+v, want %s", i, a, list[i].Name)
		}
		if prev, ok := ids[a.Name]; ok && prev != a.ID {
			t.Errorf("%s: two ids %s, %s", a.Name, prev, a.ID)
		}
		ids[a.Name] = a.ID
		if !list[i].Created.IsZero() {
			t.Fatal("AddAll changed the caller's list")
		}
	}
	if ids[first.Name] != first.ID {
		t.Errorf("existing row got id %s, want %s", ids[first.Name], first.ID)
	}
	if all, _ := ix.BySession(t.Context(), "n", "s"); len(all) != 170 {
		t.Errorf("%d rows stored, want 170", len(all))
	}
}

// TestAddAllAfter: rows become visible only with a nil outcome, which
// AddAllAfter always receives; a late outcome does not keep other writers
// of the database waiting.
func TestAddAllAfter(t *testing.T) {
	errDisk := errors.New("disk on fire")
	row := func(name string) artifacts.Artifact {
		return artifacts.Artifact{Namespace: "n", SessionID: "s", Name: name, SHA256: sum([]byte(name)), Size: 1}
	}
	t.Run("durable", func(t *testing.T) {
		ix := artifacts.NewIndex(openStore(t))
		ch := make(chan error, 1)
		ch <- nil
		if got, err := ix.AddAllAfter(t.Context(), []artifacts.Artifact{row("a")}, ch); err != nil || len(got) != 1 {
			t.Fatalf("%+v %v", got, err)
		}
		if _, err := ix.ByName(t.Context(), "n", "s", "a"); err != nil {
			t.Error(err)
		}
	})
	t.Run("not durable", func(t *testing.T) {
		ix := artifacts.NewIndex(openStore(t))
		ch := make(chan error, 1)
		ch <- errDisk
		_, err := ix.AddAllAfter(t.Context(), []artifacts.Artifact{row("a")}, ch)
		if !errors.Is(err, artifacts.ErrNotDurable) || !errors.Is(err, errDisk) {
			t.Errorf("err = %v, want ErrNotDurable and the cause", err)
		}
		if list, _ := ix.BySession(t.Context(), "n", "s"); len(list) != 0 {
			t.Errorf("rows recorded: %+v", list)
		}
	})
	t.Run("bad row still receives the outcome", func(t *testing.T) {
		ix := artifacts.NewIndex(openStore(t))
		ch := make(chan error) // unbuffered: the send below completes only if received
		sent := make(chan struct{})
		go func() { ch <- nil; close(sent) }()
		bad := row("b")
		bad.SHA256 = "nope"
		if _, err := ix.AddAllAfter(t.Context(), []artifacts.Artifact{row("a"), bad}, ch); err == nil {
			t.Error("a bad row was accepted")
		}
		select {
		case <-sent:
		case <-time.After(5 * time.Second):
			t.Error("the outcome was never received")
		}
	})
	t.Run("late outcome", func(t *testing.T) {
		ix := artifacts.NewIndex(openStore(t))
		ch := make(chan error)
		done := make(chan error, 1)
		go func() {
			_, err := ix.AddAllAfter(t.Context(), []artifacts.Artifact{row("a")}, ch)
			done <- err
		}()
		// Another writer gets through while the outcome is pending.
		start := time.Now()
		if _, err := ix.Add(t.Context(), row("other")); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("another writer waited %v", d)
		}
		if _, err := ix.ByName(t.Context(), "n", "s", "a"); !errors.Is(err, artifacts.ErrNotFound) {
			t.Errorf("row visible before the outcome: %v", err)
		}
		ch <- nil
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := ix.ByName(t.Context(), "n", "s", "a"); err != nil {
			t.Errorf("row after the outcome: %v", err)
		}
	})
}
