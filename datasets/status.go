package datasets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/artifacts"
)

// Status is the state of a dataset a session selected.
type Status string

const (
	// StatusPending means the dataset is being fetched or staged.
	StatusPending Status = "PENDING"
	// StatusLoaded means the dataset is in /session/data under its Name.
	StatusLoaded Status = "LOADED"
	// StatusFailed means the dataset could not be loaded; Reason says why.
	StatusFailed Status = "FAILED"
)

// valid reports whether s is one of the three statuses, which the table's
// CHECK constraint enforces too.
func (s Status) valid() bool {
	return s == StatusPending || s == StatusLoaded || s == StatusFailed
}

// Record is the status of one dataset in one session.
type Record struct {
	Namespace string
	SessionID string
	DatasetID string
	Name      string // file name under /session/data (SafeName of DatasetID)
	Status    Status
	Reason    string    // why it FAILED; "" otherwise
	SHA256    string    // the cached blob, once known
	Size      int64     // in bytes, once known
	Updated   time.Time // set by Statuses.Set when zero
}

// Statuses is the table of dataset statuses in the agentbox database, one
// row per namespace, session and dataset. It survives restarts, so an agent
// can be told what became of its datasets after one. It is safe for
// concurrent use by many goroutines and processes.
type Statuses struct {
	db *sql.DB
}

// NewStatuses returns the Statuses kept in db (the agentbox database, whose
// migrations create its table). It does no I/O.
func NewStatuses(db artifacts.Database) *Statuses {
	return &Statuses{db: db.DB()}
}

// Set records r, replacing the row of the same namespace, session and
// dataset. A zero r.Updated is set to now.
func (st *Statuses) Set(ctx context.Context, r Record) error {
	switch {
	case r.SessionID == "":
		return errors.New("set dataset status: empty session id")
	case r.DatasetID == "":
		return errors.New("set dataset status: empty dataset id")
	case !r.Status.valid():
		return fmt.Errorf("set dataset status: invalid status %q", r.Status)
	}
	if r.Updated.IsZero() {
		r.Updated = time.Now()
	}
	_, err := st.db.ExecContext(ctx, `INSERT INTO dataset_status
		(namespace, session_id, dataset_id, name, status, reason, sha256, size, updated)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (namespace, session_id, dataset_id) DO UPDATE SET
			name = excluded.name, status = excluded.status, reason = excluded.reason,
			sha256 = excluded.sha256, size = excluded.size, updated = excluded.updated`,
		r.Namespace, r.SessionID, r.DatasetID, r.Name, string(r.Status), r.Reason,
		r.SHA256, r.Size, formatTime(r.Updated))
	if err != nil {
		return fmt.Errorf("set status of dataset %q: %w", r.DatasetID, err)
	}
	return nil
}

// recordColumns is the column list the queries select, in scanRecord's
// order.
const recordColumns = `namespace, session_id, dataset_id, name, status, reason, sha256, size, updated`

// Get returns the status of a dataset in a session, or an error wrapping
// ErrNotFound when the session never selected it.
func (st *Statuses) Get(ctx context.Context, namespace, sessionID, datasetID string) (Record, error) {
	r, err := scanRecord(st.db.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM dataset_status
		WHERE namespace = ? AND session_id = ? AND dataset_id = ?`, namespace, sessionID, datasetID))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("status of dataset %q: %w", datasetID, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("status of dataset %q: %w", datasetID, err)
	}
	return r, nil
}

// List returns the statuses of a session's datasets ordered by dataset id;
// none is an empty list, not an error.
func (st *Statuses) List(ctx context.Context, namespace, sessionID string) ([]Record, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT `+recordColumns+` FROM dataset_status
		WHERE namespace = ? AND session_id = ? ORDER BY dataset_id`, namespace, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list dataset statuses of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	list := []Record{}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("list dataset statuses of session %q: %w", sessionID, err)
		}
		list = append(list, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list dataset statuses of session %q: %w", sessionID, err)
	}
	return list, nil
}

// DeleteSession deletes the statuses of a session, for retention, and
// returns how many it deleted.
func (st *Statuses) DeleteSession(ctx context.Context, namespace, sessionID string) (int, error) {
	res, err := st.db.ExecContext(ctx,
		`DELETE FROM dataset_status WHERE namespace = ? AND session_id = ?`, namespace, sessionID)
	if err != nil {
		return 0, fmt.Errorf("delete dataset statuses of session %q: %w", sessionID, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanRecord(s scanner) (Record, error) {
	var r Record
	var status, updated string
	if err := s.Scan(&r.Namespace, &r.SessionID, &r.DatasetID, &r.Name, &status,
		&r.Reason, &r.SHA256, &r.Size, &updated); err != nil {
		return Record{}, err
	}
	r.Status = Status(status)
	t, err := time.Parse(time.RFC3339Nano, updated)
	if err != nil {
		return Record{}, fmt.Errorf("dataset %q: updated: %w", r.DatasetID, err)
	}
	r.Updated = t
	return r, nil
}
