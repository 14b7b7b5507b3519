package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// Default caps applied by Open.
const (
	// DefaultMaxOutput is the default Store.MaxOutput: 64 KiB.
	DefaultMaxOutput = 64 << 10
	// DefaultMaxCode is the default Store.MaxCode: 1 MiB.
	DefaultMaxCode = 1 << 20
)

// busyTimeout is how long a statement waits for another connection's or
// process's write lock before it fails with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// Store is an open agentbox database. It is safe for concurrent use by many
// goroutines; other processes may have the same file open.
type Store struct {
	// MaxOutput is the most bytes of stdout and of stderr kept per execution,
	// and the largest image kept in Outputs; default DefaultMaxOutput.
	MaxOutput int
	// MaxCode is the most bytes of code kept per execution; default
	// DefaultMaxCode.
	MaxCode int

	db   *sql.DB
	path string
	hot  hotStmts
}

// Open opens the database file at path, creating it and its parent directory
// if needed, and applies the schema migrations it lacks. It returns an error
// wrapping ErrSchemaTooNew when the file was migrated by a newer binary.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open database: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// database/sql keeps 2 idle connections by default: with more calls
	// at once than that, each further one opened and closed a connection
	// per statement (its pragmas run, the prepared statements parsed
	// again), which under 10 busy sessions cost more than the statements.
	db.SetMaxIdleConns(maxIdleConns)
	s := &Store{MaxOutput: DefaultMaxOutput, MaxCode: DefaultMaxCode, db: db, path: path}
	if err := s.setWAL(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := s.hot.prepare(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return s, nil
}

// maxIdleConns is how many connections the pool keeps open between calls.
const maxIdleConns = 16

// dsn is the modernc data source name for path. The path is a "file:" URI
// with the characters URIs give a meaning escaped. The _pragma parameters run
// on every new connection of the pool, busy_timeout first, and _txlock makes
// every read-write transaction BEGIN IMMEDIATE, so it waits for the write
// lock up front instead of failing with SQLITE_BUSY when it upgrades.
// journal_mode is not among them: WAL is a property of the file, set once by
// setWAL, and SQLite answers concurrent switches to WAL with SQLITE_BUSY
// without waiting, which would fail new connections at random.
func dsn(path string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc +
		"?_pragma=busy_timeout(" + strconv.FormatInt(busyTimeout.Milliseconds(), 10) + ")" +
		"&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(NORMAL)" +
		"&_pragma=temp_store(MEMORY)" +
		"&_txlock=immediate"
}

// setWAL puts the file in WAL mode, which the file keeps. Two connections
// switching a new file at once make one fail with SQLITE_BUSY at once, busy
// timeout or not, so it retries for up to busyTimeout.
func (s *Store) setWAL(ctx context.Context) error {
	deadline := time.Now().Add(busyTimeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		var mode string
		err := s.db.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode)
		switch {
		case err == nil && strings.EqualFold(mode, "wal"):
			return nil
		case err == nil:
			return fmt.Errorf("set WAL journal mode: journal mode is %s", mode)
		case !isBusy(err) || time.Now().After(deadline):
			return fmt.Errorf("set WAL journal mode: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("set WAL journal mode: %w", context.Cause(ctx))
		case <-time.After(delay):
		}
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY or one of its extended
// codes.
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// Close closes the database. Calls after Close fail.
func (s *Store) Close() error {
	s.hot.close()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close database %s: %w", s.path, err)
	}
	return nil
}

// DB returns the connection pool, for packages that keep their own tables in
// the same file. Its read-write transactions begin IMMEDIATE.
func (s *Store) DB() *sql.DB { return s.db }

// Path returns the file name the Store was opened with.
func (s *Store) Path() string { return s.path }

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded schema file, NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order, which must be
// 1, 2, 3... without gaps.
func migrations() ([]migration, error) {
	entries, err := migrationFS.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for i, e := range entries { // ReadDir sorts by name
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want %04d_name.sql", e.Name(), i+1)
		}
		text, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(text)})
	}
	return ms, nil
}

// migrate applies the migrations the file lacks, each in its own IMMEDIATE
// transaction that first checks, under the write lock, whether another
// process applied it meanwhile.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].version
	// Fast path without the write lock: an up-to-date file needs nothing.
	if v, err := s.schemaVersion(ctx, s.db); err != nil {
		return err
	} else if v > latest {
		return fmt.Errorf("%w: version %d, this binary knows up to %d", ErrSchemaTooNew, v, latest)
	} else if v == latest {
		return nil
	}
	for _, m := range ms {
		if err := s.apply(ctx, m, latest); err != nil {
			return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
	}
	return nil
}

// queryer is what schemaVersion needs of a *sql.DB or *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion returns the newest applied migration, 0 for a new file.
func (s *Store) schemaVersion(ctx context.Context, q queryer) (int, error) {
	var n, v int
	err := q.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n)
	if err == nil && n > 0 {
		err = q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// apply applies m unless it is already recorded.
func (s *Store) apply(ctx context.Context, m migration, latest int) error {
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name    TEXT NOT NULL,
		applied TEXT NOT NULL
	)`); err != nil {
		return err
	}
	v, err := s.schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if v > latest {
		return fmt.Errorf("%w: version %d, this binary knows up to %d", ErrSchemaTooNew, v, latest)
	}
	if v >= m.version {
		return nil // another Open applied it first
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied) VALUES (?, ?, ?)`,
		m.version, m.name, formatTime(time.Now())); err != nil {
		return err
	}
	return tx.Commit()
}

// timeFormat is RFC 3339 with a fixed nine-digit fraction, so stored times
// sort as text; time.RFC3339Nano parses it.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// formatTime returns t as stored: UTC, timeFormat.
func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// parseTime parses a stored time; "" is the zero time.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}
