package tools_test

import (
	"context"

	"github.com/agentbox/agentbox/session"
)

// fake is a Manager that returns canned answers and records its calls. It
// is for one goroutine.
type fake struct {
	calls   []string // "exec key code", "select key id", ...
	nopts   int      // options of the last Exec or SelectDataset
	result  *session.Result
	listing session.Listing
	sel     session.Selection
	export  session.Export
	arts    []session.Artifact
	err     error
}

func (f *fake) record(call string) {
	f.calls = append(f.calls, call)
}

func (f *fake) Exec(_ context.Context, key, code string, opts ...session.ExecOption) (*session.Result, error) {
	f.record("exec " + key + " " + code)
	f.nopts = len(opts)
	if f.err != nil {
		return nil, f.err
	}
	if f.result == nil {
		return &session.Result{Session: key}, nil
	}
	return f.result, nil
}

func (f *fake) Datasets(_ context.Context, key string) (session.Listing, error) {
	f.record("datasets " + key)
	return f.listing, f.err
}

func (f *fake) SelectDataset(_ context.Context, key, id string, opts ...session.SelectOption) (session.Selection, error) {
	f.record("select " + key + " " + id)
	f.nopts = len(opts)
	return f.sel, f.err
}

func (f *fake) Export(_ context.Context, key, file string) (session.Export, error) {
	f.record("export " + key + " " + file)
	return f.export, f.err
}

// lister is a fake that can also list artifacts.
type lister struct{ *fake }

func (l lister) Artifacts(_ context.Context, key string) ([]session.Artifact, error) {
	l.record("artifacts " + key)
	return l.arts, l.err
}
