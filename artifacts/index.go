package artifacts

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Index is the table of artifacts in the agentbox database: one row per
// session, relative name and content, the content being a blob in the
// Blobstore. It is safe for concurrent use by many goroutines and by other
// processes with the same database open: the store runs the file in WAL mode
// with a busy timeout, and every write here is a single statement.
type Index struct {
	db *sql.DB
	// get is the statement of Get, prepared on first use: a download server
	// runs it on every request, and preparing it each time costs as much as
	// running it.
	get struct {
		sync.Mutex
		stmt *sql.Stmt
	}
}

// NewIndex returns the Index kept in db, whose migrations create its table.
// It does no I/O.
func NewIndex(db Database) *Index {
	return &Index{db: db.DB()}
}

// timeFormat is the store's: RFC 3339 UTC with a fixed nine-digit fraction,
// so stored times sort as text and time.RFC3339Nano parses them.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// columns is the column list every query selects, in scanArtifact's order.
const columns = `id, namespace, session_id, session_key, name, sha256, size, mime, created`

// Add records a, assigning an ID (see newID: unguessable) and, when
// zero, Created, and returns the row as stored. Adding the same namespace,
// session, name and content again returns the existing row, ID unchanged,
// with Created moved forward to the later of the two: the newest ingestion
// of a name is its latest version even when a file returns to earlier
// content. The blob should be in the Blobstore already (see GC).
func (ix *Index) Add(ctx context.Context, a Artifact) (Artifact, error) {
	return ix.add(ctx, ix.db, a)
}

// AddAll is Add for many artifacts in one transaction: what one execution
// made is recorded together (and a thousand small files cost one commit,
// not a thousand). It returns the rows in list's order. On error nothing is
// recorded.
func (ix *Index) AddAll(ctx context.Context, list []Artifact) ([]Artifact, error) {
	return ix.AddAllAfter(ctx, list, nil)
}

// ErrNotDurable means AddAllAfter recorded nothing because the blobs the
// rows name did not become durable; the error also wraps why.
var ErrNotDurable = errors.New("blobs not durable")

// maxDurableHold bounds how long AddAllAfter keeps the database locked for
// writing while it waits for durable: every other writer of the database
// (session history, other ingestions) waits meanwhile, and a flush to disk
// can take seconds when the file system is busy.
const maxDurableHold = 100 * time.Millisecond

// AddAllAfter is AddAll for rows whose blobs the caller is making durable
// meanwhile (a Batch's Commit, whose outcome it sends on durable): the rows
// are inserted while the disk works, and committed only once durable has
// delivered nil, so that no row ever names content a crash could lose. If
// the outcome does not come soon after the inserts, the transaction is
// rolled back and run again once it has. When the outcome is an error,
// nothing is recorded and the error returned wraps ErrNotDurable and it.
// AddAllAfter always receives the outcome before it returns, whatever else
// fails. A nil durable is AddAll.
func (ix *Index) AddAllAfter(ctx context.Context, list []Artifact, durable <-chan error) ([]Artifact, error) {
	received := durable == nil
	var derr error
	receive := func(err error) error {
		received = true
		if err != nil {
			derr = fmt.Errorf("add artifacts: %w: %w", ErrNotDurable, err)
		}
		return derr
	}
	outcome := func() error {
		if !received {
			return receive(<-durable)
		}
		return derr
	}
	defer outcome()

	list = slices.Clone(list)
	now := time.Now()
	for i := range list {
		if err := checkArtifact(list[i]); err != nil {
			return nil, err
		}
		if list[i].Created.IsZero() {
			list[i].Created = now
		}
	}
	if len(list) == 0 {
		return nil, outcome()
	}
	got, err := ix.insertAll(ctx, list, func() error {
		if received {
			return derr
		}
		t := time.NewTimer(maxDurableHold)
		defer t.Stop()
		select {
		case err := <-durable:
			return receive(err)
		case <-t.C:
			return errHoldTooLong
		}
	})
	if errors.Is(err, errHoldTooLong) {
		if err := outcome(); err != nil {
			return nil, err
		}
		got, err = ix.insertAll(ctx, list, outcome)
	}
	if err != nil {
		return nil, err
	}
	out := make([]Artifact, len(list))
	for i, a := range list {
		out[i] = got[rowKey{a.Namespace, a.SessionID, a.Name, a.SHA256}]
	}
	return out, nil
}

// errHoldTooLong makes insertAll roll back: the blobs took too long.
var errHoldTooLong = errors.New("durable outcome late")

// rowKey is what makes an artifact row unique.
type rowKey struct{ namespace, session, name, sha string }

// insertAll inserts list in one transaction and commits it if ready, called
// after the inserts, returns nil; it returns the stored rows by key.
func (ix *Index) insertAll(ctx context.Context, list []Artifact, ready func() error) (map[rowKey]Artifact, error) {
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("add artifacts: %w", err)
	}
	defer tx.Rollback()
	got := make(map[rowKey]Artifact, len(list))
	for chunk := range slices.Chunk(list, addChunk) {
		if err := insertChunk(ctx, tx, chunk, got); err != nil {
			return nil, err
		}
	}
	if ready != nil {
		if err := ready(); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("add artifacts: %w", err)
	}
	return got, nil
}

// insertChunk inserts rows with one statement (with this SQLite, running a
// statement costs several times what inserting a row does) and puts the
// stored rows into got.
func insertChunk(ctx context.Context, tx *sql.Tx, chunk []Artifact, got map[rowKey]Artifact) error {
	args := make([]any, 0, len(chunk)*9)
	for _, a := range chunk {
		args = append(args, newID(), a.Namespace, a.SessionID, a.SessionKey, a.Name, a.SHA256, a.Size, a.MIME, formatTime(a.Created))
	}
	rows, err := tx.QueryContext(ctx, addAllQuery(len(chunk)), args...)
	if err != nil {
		return fmt.Errorf("add artifacts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return fmt.Errorf("add artifacts: %w", err)
		}
		got[rowKey{a.Namespace, a.SessionID, a.Name, a.SHA256}] = a
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("add artifacts: %w", err)
	}
	return nil
}

// addChunk is how many rows one statement of AddAll inserts: 9 parameters
// each, well under SQLite's limit of 32 766.
const addChunk = 100

// addAllQuery is addQuery for n rows. RETURNING lists the new or existing
// rows in no particular order; AddAll matches them to its list by key.
func addAllQuery(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO artifacts (` + columns + `) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	b.WriteString(addConflict)
	return b.String()
}

// addQuery adds a row or finds the existing one. One statement, so it is
// atomic without a transaction: the upsert and RETURNING give the new or the
// existing row.
const addQuery = `INSERT INTO artifacts (` + columns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)` + addConflict

const addConflict = `
	ON CONFLICT (namespace, session_id, name, sha256)
	DO UPDATE SET created = max(created, excluded.created)
	RETURNING ` + columns

// rowQueryer is a *sql.DB or a *sql.Tx.
type rowQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (ix *Index) add(ctx context.Context, q rowQueryer, a Artifact) (Artifact, error) {
	if err := checkArtifact(a); err != nil {
		return Artifact{}, err
	}
	if a.Created.IsZero() {
		a.Created = time.Now()
	}
	row := q.QueryRowContext(ctx, addQuery,
		newID(), a.Namespace, a.SessionID, a.SessionKey, a.Name, a.SHA256, a.Size, a.MIME,
		formatTime(a.Created))
	got, err := scanArtifact(row)
	if err != nil {
		return Artifact{}, fmt.Errorf("add artifact %q: %w", a.Name, err)
	}
	return got, nil
}

// checkArtifact refuses a row Add cannot record.
func checkArtifact(a Artifact) error {
	switch {
	case a.SessionID == "":
		return errors.New("add artifact: empty session id")
	case a.Name == "" || strings.ContainsRune(a.Name, 0):
		return fmt.Errorf("add artifact %q: want a non-empty name without NUL", a.Name)
	case !validSHA256(a.SHA256):
		return fmt.Errorf("add artifact %q: %w", a.Name, ErrInvalidSHA256)
	case a.Size < 0:
		return fmt.Errorf("add artifact %q: negative size %d", a.Name, a.Size)
	}
	return nil
}

// newID returns a fresh artifact ID: 26 lowercase base32hex characters
// (they survive case-folding) for 48 bits of the time in milliseconds then 80
// random bits. The random part keeps it unguessable (and a download needs a
// token signed for the id besides); the time in front makes new rows land at
// the end of the id index instead of anywhere in it, which makes an
// ingestion of a thousand files a fifth cheaper.
func newID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	rand.Read(b[6:])
	return strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// idEncoding is base32 with the extended hex alphabet, whose characters sort
// as the bits they stand for (the standard alphabet's "2"-"7" sort before
// its letters), so ids sort by their time.
var idEncoding = base32.HexEncoding.WithPadding(base32.NoPadding)

// Get returns the artifact with the id, or an error wrapping ErrNotFound.
func (ix *Index) Get(ctx context.Context, id string) (Artifact, error) {
	stmt, err := ix.getStmt(ctx)
	if err != nil {
		return Artifact{}, fmt.Errorf("get artifact %q: %w", id, err)
	}
	a, err := scanArtifact(stmt.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Artifact{}, fmt.Errorf("get artifact %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("get artifact %q: %w", id, err)
	}
	return a, nil
}

// getStmt returns Get's prepared statement. database/sql prepares it again
// on each connection that runs it; it is closed with the database.
func (ix *Index) getStmt(ctx context.Context) (*sql.Stmt, error) {
	ix.get.Lock()
	defer ix.get.Unlock()
	if ix.get.stmt == nil {
		stmt, err := ix.db.PrepareContext(ctx, `SELECT `+columns+` FROM artifacts WHERE id = ?`)
		if err != nil {
			return nil, err
		}
		ix.get.stmt = stmt
	}
	return ix.get.stmt, nil
}

// BySession returns the artifacts of a session, every version of every name,
// newest first; none is no error.
func (ix *Index) BySession(ctx context.Context, namespace, sessionID string) ([]Artifact, error) {
	rows, err := ix.db.QueryContext(ctx, `SELECT `+columns+` FROM artifacts
		WHERE namespace = ? AND session_id = ?
		ORDER BY created DESC, name, id`, namespace, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	var list []Artifact
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return nil, fmt.Errorf("list artifacts of session %q: %w", sessionID, err)
		}
		list = append(list, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list artifacts of session %q: %w", sessionID, err)
	}
	return list, nil
}

// ByName returns the latest version of a session's artifact with the
// relative name, or an error wrapping ErrNotFound.
func (ix *Index) ByName(ctx context.Context, namespace, sessionID, name string) (Artifact, error) {
	a, err := scanArtifact(ix.db.QueryRowContext(ctx, `SELECT `+columns+` FROM artifacts
		WHERE namespace = ? AND session_id = ? AND name = ?
		ORDER BY created DESC, id LIMIT 1`, namespace, sessionID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Artifact{}, fmt.Errorf("get artifact %q of session %q: %w", name, sessionID, ErrNotFound)
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("get artifact %q of session %q: %w", name, sessionID, err)
	}
	return a, nil
}

// Latest returns the SHA-256 of the latest version of each of a session's
// artifact names, for telling which files changed since the last ingestion.
func (ix *Index) Latest(ctx context.Context, namespace, sessionID string) (map[string]string, error) {
	// With max() as the only aggregate, SQLite takes the bare column sha256
	// from the row holding the maximum: the latest version of each name.
	rows, err := ix.db.QueryContext(ctx, `SELECT name, sha256, max(created) FROM artifacts
		WHERE namespace = ? AND session_id = ? GROUP BY name`, namespace, sessionID)
	if err != nil {
		return nil, fmt.Errorf("latest artifacts of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	latest := make(map[string]string)
	for rows.Next() {
		var name, sum, created string
		if err := rows.Scan(&name, &sum, &created); err != nil {
			return nil, fmt.Errorf("latest artifacts of session %q: %w", sessionID, err)
		}
		latest[name] = sum
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("latest artifacts of session %q: %w", sessionID, err)
	}
	return latest, nil
}

// Referenced reports whether any row, of any session, names the blob. It
// makes an Index the Referencer that Blobstore.GC asks.
func (ix *Index) Referenced(ctx context.Context, sha256 string) (bool, error) {
	var n int
	err := ix.db.QueryRowContext(ctx,
		`SELECT EXISTS (SELECT 1 FROM artifacts WHERE sha256 = ?)`, sha256).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up blob %s: %w", sha256, err)
	}
	return n != 0, nil
}

// scanner is what scanArtifact needs of a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanArtifact(s scanner) (Artifact, error) {
	var a Artifact
	var created string
	if err := s.Scan(&a.ID, &a.Namespace, &a.SessionID, &a.SessionKey, &a.Name,
		&a.SHA256, &a.Size, &a.MIME, &created); err != nil {
		return Artifact{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, created)
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact %s: created: %w", a.ID, err)
	}
	a.Created = t
	return a, nil
}
