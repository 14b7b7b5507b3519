package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DeleteSession deletes the index rows of a session and returns how many it
// deleted. The blobs stay until GC finds them unreferenced.
func (ix *Index) DeleteSession(ctx context.Context, namespace, sessionID string) (n int, err error) {
	res, err := ix.db.ExecContext(ctx,
		`DELETE FROM artifacts WHERE namespace = ? AND session_id = ?`, namespace, sessionID)
	if err != nil {
		return 0, fmt.Errorf("delete artifacts of session %q: %w", sessionID, err)
	}
	return rowsAffected(res)
}

// Prune deletes the index rows, of every session, last ingested before
// olderThan and returns how many it deleted. The blobs stay until GC finds
// them unreferenced. It scans the table: an index on the time would slow
// every ingestion for the sake of this rare, offline call.
func (ix *Index) Prune(ctx context.Context, olderThan time.Time) (n int, err error) {
	res, err := ix.db.ExecContext(ctx,
		`DELETE FROM artifacts WHERE created < ?`, formatTime(olderThan))
	if err != nil {
		return 0, fmt.Errorf("prune artifacts: %w", err)
	}
	return rowsAffected(res)
}

func rowsAffected(res interface{ RowsAffected() (int64, error) }) (int, error) {
	n, err := res.RowsAffected()
	return int(n), err
}

// Referencer tells GC whether a blob is still needed. *Index is one.
type Referencer interface {
	// Referenced reports whether any index row names the blob.
	Referenced(ctx context.Context, sha256 string) (bool, error)
}

// AnyOf is a Referencer for a blobstore shared by several indexes (the
// artifact index and the dataset cache): a blob is referenced if any of
// them names it.
func AnyOf(refs ...Referencer) Referencer { return anyOf(refs) }

type anyOf []Referencer

func (a anyOf) Referenced(ctx context.Context, sha256 string) (bool, error) {
	for _, r := range a {
		ok, err := r.Referenced(ctx, sha256)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// GC removes the blobs no row of refs names and the temp files of Puts that
// stopped more than Grace ago, and returns how many blobs it removed. It is
// safe while Puts and Index.Adds run concurrently, in this process or
// another, under one rule:
//
// A blob is removed only when it is unreferenced AND its modification time is
// older than Grace. Put sets that time whenever it stores or deduplicates
// content, so a blob whose row is not added yet is spared, provided the
// ingestion adds its row within Grace of its Put.
//
// The check and the removal are not atomic, so GC first renames the blob
// into tmp, then looks at it again: when a Put touched it or a row appeared
// in between, the blob goes back under its name (identical bytes, so
// replacing a copy a concurrent Put made is harmless). A Put that comes after
// the rename finds no blob and writes its own copy. A reader may miss such a
// blob for the instant it spends in tmp. Blobs left in tmp by a GC that
// crashed are put back by the next GC, which then judges them afresh.
//
// GC first places the blobs of pending packs (see Flush): a pack a crashed
// process left is placed here at the latest.
//
// GC keeps going after an error on one blob and returns them all joined. It
// removes no folders: a Put may be about to rename a blob into one.
func (b *Blobstore) GC(ctx context.Context, refs Referencer) (removed int, err error) {
	cutoff := time.Now().Add(-b.grace())
	errs := b.sweepTmp(cutoff)
	if err := b.Flush(ctx); err != nil {
		errs = append(errs, err)
	}
	top, err := os.ReadDir(b.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, errors.Join(errs...) // nothing was ever put
	}
	if err != nil {
		return 0, fmt.Errorf("collect blobs: %w", err)
	}
	for _, d1 := range top {
		if !d1.IsDir() || !hexPair(d1.Name()) {
			continue // tmp, or something that is not ours
		}
		sub, err := os.ReadDir(filepath.Join(b.dir, d1.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, d2 := range sub {
			if !d2.IsDir() || !hexPair(d2.Name()) {
				continue
			}
			blobs, err := os.ReadDir(filepath.Join(b.dir, d1.Name(), d2.Name()))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, e := range blobs {
				if err := ctx.Err(); err != nil {
					return removed, errors.Join(append(errs, context.Cause(ctx))...)
				}
				sha := e.Name()
				if !e.Type().IsRegular() || !validSHA256(sha) || sha[0:2] != d1.Name() || sha[2:4] != d2.Name() {
					continue
				}
				ok, err := b.collect(ctx, refs, sha, cutoff)
				if err != nil {
					errs = append(errs, fmt.Errorf("collect blob %s: %w", sha, err))
				}
				if ok {
					removed++
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("collect blobs: %w", err)
	}
	return removed, nil
}

// collect removes one blob if it is unreferenced and older than cutoff,
// following the protocol GC describes, and reports whether it did.
func (b *Blobstore) collect(ctx context.Context, refs Referencer, sha string, cutoff time.Time) (bool, error) {
	final := b.path(sha)
	if keep, err := b.keep(ctx, refs, sha, final, cutoff); errors.Is(err, fs.ErrNotExist) {
		return false, nil // removed meanwhile
	} else if keep || err != nil {
		return false, err
	}
	if b.gcHook != nil {
		b.gcHook(sha)
	}
	trash := filepath.Join(b.dir, tmpDir, gcPrefix+sha+"-"+newID())
	if err := os.Rename(final, trash); errors.Is(err, fs.ErrNotExist) {
		return false, nil // another GC took it
	} else if err != nil {
		return false, err
	}
	keep, err := b.keep(ctx, refs, sha, trash, cutoff)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // another GC put it back
	}
	if keep || err != nil {
		// Put it back even when unsure: a blob kept too long costs disk
		// space, one removed too early loses an artifact.
		if rerr := os.Rename(trash, final); rerr != nil {
			return false, errors.Join(err, rerr)
		}
		return false, err
	}
	if err := os.Remove(trash); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// keep reports whether the blob, now at file, must stay: touched after
// cutoff, or named by a row.
func (b *Blobstore) keep(ctx context.Context, refs Referencer, sha, file string, cutoff time.Time) (bool, error) {
	fi, err := os.Lstat(file)
	if err != nil {
		return true, err
	}
	if fi.ModTime().After(cutoff) {
		return true, nil
	}
	return refs.Referenced(ctx, sha)
}

// sweepTmp removes Put temp files last written before cutoff (their Put is
// long dead) and puts back the blobs a crashed GC left in tmp.
func (b *Blobstore) sweepTmp(cutoff time.Time) []error {
	dir := filepath.Join(b.dir, tmpDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return []error{fmt.Errorf("sweep temp files: %w", err)}
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, putPrefix):
			fi, err := e.Info()
			if err != nil || fi.ModTime().After(cutoff) {
				continue // gone, or a Put still writing
			}
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("sweep temp files: %w", err))
			}
		case strings.HasPrefix(name, gcPrefix):
			// A concurrent GC may be judging this one right now; putting it
			// back makes that GC skip it, which is safe.
			sha, _, _ := strings.Cut(strings.TrimPrefix(name, gcPrefix), "-")
			if !validSHA256(sha) {
				continue
			}
			final := b.path(sha)
			err := mkdirAllSync(filepath.Dir(final))
			if err == nil {
				err = os.Rename(filepath.Join(dir, name), final)
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("restore blob %s: %w", sha, err))
			}
		}
	}
	return errs
}

// hexPair reports whether a folder name is two lowercase hex digits.
func hexPair(s string) bool {
	return len(s) == 2 && isHexDigit(s[0]) && isHexDigit(s[1])
}
