package session

import (
	"context"
	"errors"
	"fmt"
	"iter"
)

// ErrNotWritten is the result of a file of an all-or-nothing write
// (WriteFileSeqAll) that was whole, but not put in place because the call
// was refused; it wraps the reason.
var ErrNotWritten = errors.New("not written: the call was refused")

// WriteFileSeqAll is WriteFileSeq, all or nothing: the files are staged
// beside their targets (code sees none of them at their paths) and put in
// place together only when every one was written whole and verdict, asked
// once the sequence has ended, returns nil. Otherwise none is: every
// result that would have been written is ErrNotWritten, wrapping why (a
// file over a cap, a bad path, verdict's error). verdict lets a caller
// that reads the files from a request refuse the call for what it found
// after the last file (a malformed part). Only a failure while putting
// the staged files in place (a folder made at a path meanwhile) can leave
// some written and not others; their results say which.
func (m *Manager) WriteFileSeqAll(ctx context.Context, key string, files iter.Seq[FileWrite], verdict func() error) ([]WriteResult, error) {
	if verdict == nil {
		verdict = func() error { return nil }
	}
	return m.writeFileSeq(ctx, key, files, verdict)
}

// commitError is one file the helper could not put in place.
type commitError struct {
	Path  string       `json:"path"`
	Error *helperError `json:"error"`
}

// refuseAll marks every result that was, or would have been, written as
// not written, for why.
func refuseAll(results []WriteResult, why error) {
	if why == nil {
		return
	}
	for i := range results {
		if results[i].Err == nil {
			results[i].Size = 0
			results[i].Err = &FileError{Op: "write", Path: results[i].Path, Err: fmt.Errorf("%w: %w", ErrNotWritten, why)}
		}
	}
}

// committed reads the helper's answer to a commit and marks the files it
// could not put in place. A whole commit (sent with the files, made only
// if each was written) that was not made refuses them all for the file
// that failed.
func (m *Manager) committed(answers <-chan writeAnswer, results []WriteResult, fileErr func(int, error), whole bool) error {
	a, ok := <-answers
	switch {
	case !ok:
		return errors.New("the file helper stopped answering before the commit")
	case a.err != nil:
		return a.err
	case !a.r.Committed && whole:
		for _, r := range results {
			if r.Err != nil {
				refuseAll(results, r.Err)
				return nil
			}
		}
		return errors.New("the file helper did not commit, and no file failed")
	case !a.r.Committed:
		return errors.New("the file helper did not commit")
	}
	for _, ce := range a.r.Errors {
		for i := range results {
			if results[i].Path == ce.Path && results[i].Err == nil {
				results[i].Size = 0
				var err error = errors.New("could not be put in place")
				if ce.Error != nil {
					err = ce.Error.err()
				}
				fileErr(i, err)
			}
		}
	}
	return nil
}
