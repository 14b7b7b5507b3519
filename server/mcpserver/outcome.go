package mcpserver

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"sync"

	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/session"
)

// outcome is what one tool call did with the Manager, seen from beside the
// tools package: its text replies explain failures for a model but do not
// say, in a form a program can read, whether the call failed. A call is an
// error for MCP unless some Manager call succeeded and none failed: input
// the tool refused never reaches the Manager, and everything it reports as
// "could not" comes from a Manager error or a failed dataset.
type outcome struct {
	mu     sync.Mutex
	ok     bool
	failed bool
	result *session.Result // run_python's, for its figures
}

func (o *outcome) record(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.failed = true
	} else {
		o.ok = true
	}
}

// isError says whether the call's reply is an error for MCP.
func (o *outcome) isError() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed || !o.ok
}

func (o *outcome) execResult() *session.Result {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.result
}

// errFailedDataset marks a selection whose status is FAILED.
var errFailedDataset = errors.New("dataset not loaded")

type outcomeKey struct{}

func withOutcome(ctx context.Context, o *outcome) context.Context {
	return context.WithValue(ctx, outcomeKey{}, o)
}

// outcomeOf returns ctx's outcome, or a throwaway one for a call that did
// not come through a handler of this package.
func outcomeOf(ctx context.Context) *outcome {
	if o, ok := ctx.Value(outcomeKey{}).(*outcome); ok {
		return o
	}
	return &outcome{}
}

// recorder is the Manager the tools package is given: the real one, each
// call's outcome noted in the call's context.
type recorder struct{ m *session.Manager }

func (r recorder) Exec(ctx context.Context, key, code string, opts ...session.ExecOption) (*session.Result, error) {
	res, err := r.m.Exec(ctx, key, code, opts...)
	o := outcomeOf(ctx)
	o.record(err)
	if err == nil {
		o.mu.Lock()
		o.result = res
		o.mu.Unlock()
	}
	return res, err
}

func (r recorder) Datasets(ctx context.Context, key string) (session.Listing, error) {
	l, err := r.m.Datasets(ctx, key)
	outcomeOf(ctx).record(err)
	return l, err
}

// SelectDataset counts a dataset that could not be loaded (an unknown id,
// a source that refused) as a failure: the Manager reports it as a status,
// not a Go error.
func (r recorder) SelectDataset(ctx context.Context, key, id string, opts ...session.SelectOption) (session.Selection, error) {
	sel, err := r.m.SelectDataset(ctx, key, id, opts...)
	o := outcomeOf(ctx)
	o.record(err)
	if err == nil && sel.Status == datasets.StatusFailed {
		o.record(errFailedDataset)
	}
	return sel, err
}

func (r recorder) Export(ctx context.Context, key, file string) (session.Export, error) {
	e, err := r.m.Export(ctx, key, file)
	outcomeOf(ctx).record(err)
	return e, err
}

func (r recorder) Artifacts(ctx context.Context, key string) ([]session.Artifact, error) {
	a, err := r.m.Artifacts(ctx, key)
	outcomeOf(ctx).record(err)
	return a, err
}

func (r recorder) CanSelectDatasets() bool { return r.m.CanSelectDatasets() }

func (r recorder) WriteFile(ctx context.Context, key, path string, data io.Reader, mode fs.FileMode) (int64, error) {
	n, err := r.m.WriteFile(ctx, key, path, data, mode)
	outcomeOf(ctx).record(err)
	return n, err
}

func (r recorder) ReadFile(ctx context.Context, key, path string, offset, length int64) (*session.FileReader, error) {
	fr, err := r.m.ReadFile(ctx, key, path, offset, length)
	outcomeOf(ctx).record(err)
	return fr, err
}

func (r recorder) ListFiles(ctx context.Context, key, dir string, opts session.ListOptions) (*session.FileList, error) {
	l, err := r.m.ListFiles(ctx, key, dir, opts)
	outcomeOf(ctx).record(err)
	return l, err
}

func (r recorder) Run(ctx context.Context, key string, cmd session.Command) (*session.CommandResult, error) {
	res, err := r.m.Run(ctx, key, cmd)
	outcomeOf(ctx).record(err)
	return res, err
}
