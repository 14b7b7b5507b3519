package store

import (
	"context"
	"fmt"
)

// LiveSessions returns the sessions of namespace ns whose key starts with
// prefix and whose end is not recorded (running or paused): what one
// tenant holds, as every process sharing the database sees it. The prefix
// is compared as text, never as a LIKE pattern.
func (s *Store) LiveSessions(ctx context.Context, ns, prefix string) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE namespace = ? AND stopped = '' AND substr(key, 1, length(?)) = ?`, ns, prefix, prefix)
	if err != nil {
		return nil, fmt.Errorf("live sessions of keys %q: %w", prefix, err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("live sessions of keys %q: %w", prefix, err)
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("live sessions of keys %q: %w", prefix, err)
	}
	return out, nil
}
