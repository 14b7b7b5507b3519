package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/session"
)

// Tool is one tool offered to a language model.
type Tool struct {
	// Name is what the model calls the tool by.
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// Schema is the JSON Schema of the tool's input object.
	Schema json.RawMessage
	// Call runs the tool on the model's input and returns the text for the
	// model. It returns an error only when the system failed; bad input is
	// explained in the text.
	Call func(ctx context.Context, input json.RawMessage) (string, error)
}

// Manager is what the tools need from a *session.Manager.
type Manager interface {
	Exec(ctx context.Context, key, code string, opts ...session.ExecOption) (*session.Result, error)
	Datasets(ctx context.Context, key string) (session.Listing, error)
	SelectDataset(ctx context.Context, key, id string, opts ...session.SelectOption) (session.Selection, error)
	Export(ctx context.Context, key, file string) (session.Export, error)
}

// ArtifactLister is the optional capability of a Manager to list the
// artifacts of a session, newest first, every version of every name (as
// *session.Manager does). New adds list_artifacts when the Manager has it;
// the tool lists the latest version of each name.
type ArtifactLister interface {
	Artifacts(ctx context.Context, key string) ([]session.Artifact, error)
}

// DatasetSelector is the optional capability of a Manager to say whether
// SelectDataset can load anything (*session.Manager: DATASET_ACCESS is API
// or HYBRID and a fetcher is configured). New leaves select_dataset out,
// and the other tools do not mention it, when it says false: the tool could
// only refuse. A Manager without it is offered select_dataset.
type DatasetSelector interface {
	CanSelectDatasets() bool
}

// Options configure the tools.
type Options struct {
	// SessionKey returns the session key (conversation or thread id) of the
	// call, usually from a value the backend put in ctx. An error is a Go
	// error of the call. Default: every call uses the key "default".
	SessionKey func(ctx context.Context) (string, error)
	// MaxReplyBytes bounds each part of a reply (stdout, stderr, result,
	// listing...), in bytes. Default 16 KiB.
	MaxReplyBytes int
	// CodeToolName is the name the code tool is offered under, and the
	// name the other tools' descriptions and replies send the model to.
	// Default "code_sandbox" (an MCP server offers it as run_python).
	CodeToolName string
	// MaxTimeout is the longest timeout_s a model may ask code_sandbox for.
	// Default 10 minutes. Without timeout_s the session's EXEC_TIMEOUT_S
	// applies.
	MaxTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultCodeToolName  = "code_sandbox"
	DefaultMaxReplyBytes = 16 << 10
	DefaultMaxTimeout    = 10 * time.Minute
)

// New returns the tools backed by m, which is usually a *session.Manager:
// code_sandbox, list_datasets, select_dataset (unless m is a
// DatasetSelector that cannot select) and export_dataset, list_artifacts
// if m is an ArtifactLister, write_file, read_file and list_files if m is a
// FileManager, and run_shell if m is a ShellRunner.
func New(m Manager, opts Options) []Tool {
	if opts.SessionKey == nil {
		opts.SessionKey = func(context.Context) (string, error) { return "default", nil }
	}
	if opts.CodeToolName == "" {
		opts.CodeToolName = DefaultCodeToolName
	}
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if opts.MaxTimeout <= 0 {
		opts.MaxTimeout = DefaultMaxTimeout
	}
	t := &toolset{m: m, opts: opts, canSelect: true}
	if s, ok := m.(DatasetSelector); ok {
		t.canSelect = s.CanSelectDatasets()
	}
	list := []Tool{t.codeSandbox(), t.listDatasets()}
	if t.canSelect {
		list = append(list, t.selectDataset())
	}
	list = append(list, t.exportDataset())
	if l, ok := m.(ArtifactLister); ok {
		list = append(list, t.listArtifacts(l))
	}
	if f, ok := m.(FileManager); ok {
		list = append(list, t.fileTools(f)...)
	}
	if r, ok := m.(ShellRunner); ok {
		list = append(list, t.runShell(r))
	}
	return list
}

type callIDKey struct{}

// WithCallID returns ctx carrying the framework's id of a tool call.
// code_sandbox passes it as the execution id (session.ExecID), so the same
// call retried returns the recorded result instead of running the code again.
func WithCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

func callID(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

// toolset holds what every tool shares.
type toolset struct {
	m         Manager
	opts      Options
	canSelect bool // select_dataset is offered
}

func (t *toolset) key(ctx context.Context) (string, error) {
	key, err := t.opts.SessionKey(ctx)
	if err != nil {
		return "", fmt.Errorf("session key: %w", err)
	}
	return key, nil
}
