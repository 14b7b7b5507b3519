package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
)

// openTest opens a new database in a temporary directory, closed at cleanup.
func openTest(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "sub", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// migrationRows returns the versions recorded in schema_migrations.
// allMigrations lists the versions of the migration files, so these tests
// need no edit when a migration is added.
func allMigrations(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	var vs []int
	for _, e := range entries {
		v, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			t.Fatalf("migration file %s: %v", e.Name(), err)
		}
		vs = append(vs, v)
	}
	return vs
}

func migrationRows(t *testing.T, s *store.Store) []int {
	t.Helper()
	rows, err := s.DB().QueryContext(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestOpenPragmas(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	// Ask several pooled connections at once, so that not only the first has them.
	conns := make([]interface{ Close() error }, 3)
	for i := range conns {
		c, err := s.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		for _, p := range []struct{ pragma, want string }{
			{"journal_mode", "wal"},
			{"foreign_keys", "1"},
			{"synchronous", "1"},
			{"busy_timeout", "10000"},
		} {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != p.want {
				t.Errorf("conn %d: PRAGMA %s = %q, want %q", i, p.pragma, got, p.want)
			}
		}
	}
	for _, c := range conns {
		c.Close()
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentbox.db")
	for i := range 3 {
		s, err := store.Open(ctx, path)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if got, want := migrationRows(t, s), allMigrations(t); !slices.Equal(got, want) {
			t.Errorf("open %d: schema_migrations = %v, want %v", i, got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConcurrentOpen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "new", "agentbox.db")
	const n = 8
	stores := make([]*store.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = store.Open(ctx, path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
		}
	}
	for _, s := range stores {
		if s == nil {
			continue
		}
		if got, want := migrationRows(t, s), allMigrations(t); !slices.Equal(got, want) {
			t.Errorf("schema_migrations = %v, want %v", got, want)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestSchemaTooNew(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentbox.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx,
		`INSERT INTO schema_migrations (version, name, applied) VALUES (999, 'future', '')`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = store.Open(ctx, path)
	if err == nil {
		s.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Errorf("err = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want the path in it", err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	if _, err := store.Open(ctx, ""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
	// A directory where the file should be.
	dir := t.TempDir()
	if _, err := store.Open(ctx, dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("Open(dir) = %v, want an error naming %s", err, dir)
	}
}

func TestOpenCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if s, err := store.Open(ctx, filepath.Join(t.TempDir(), "agentbox.db")); err == nil {
		s.Close()
		t.Error("Open with a canceled context succeeded")
	}
}

func TestPathWithURICharacters(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "odd ?#% name", "a?b#c%20.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var file string
	if err := s.DB().QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil {
		t.Fatal(err)
	}
	if file != path {
		t.Errorf("database file = %q, want %q", file, path)
	}
}
