package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Fact returns the value of engine fact name and when it was observed, or
// ErrNotFound.
func (s *Store) Fact(ctx context.Context, name string) (string, time.Time, error) {
	var value string
	var observed int64
	err := s.db.QueryRowContext(ctx, `SELECT value, observed FROM engine_facts WHERE name = ?`, name).Scan(&value, &observed)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, fmt.Errorf("engine fact %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read engine fact %q: %w", name, err)
	}
	return value, time.UnixMilli(observed), nil
}

// SetFact records engine fact name as observed at at.
func (s *Store) SetFact(ctx context.Context, name, value string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO engine_facts (name, value, observed) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value, observed = excluded.observed`, name, value, at.UnixMilli())
	if err != nil {
		return fmt.Errorf("record engine fact %q: %w", name, err)
	}
	return nil
}
