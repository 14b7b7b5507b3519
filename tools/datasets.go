package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/session"
)

const (
	noInputExample  = `{}`
	selectExample   = `{"dataset_id": "sales-2024"}`
	exportExample   = `{"path": "/session/data/result.parquet"}`
	emptyObjectType = `{"type":"object","properties":{},"additionalProperties":false}`
)

func (t *toolset) listDatasets() Tool {
	return Tool{
		Name:        "list_datasets",
		Description: t.listDatasetsDescription(),
		Schema:      []byte(emptyObjectType),
		Call: func(ctx context.Context, input json.RawMessage) (string, error) {
			var in struct{}
			if msg := decode(input, &in, noInputExample); msg != "" {
				return msg, nil
			}
			key, err := t.key(ctx)
			if err != nil {
				return "", err
			}
			l, err := t.m.Datasets(ctx, key)
			if err != nil {
				return "", fmt.Errorf("list datasets: %w", err)
			}
			return cut(formatListing(l, t.opts.CodeToolName), t.opts.MaxReplyBytes), nil
		},
	}
}

func (t *toolset) listDatasetsDescription() string {
	d := "List the datasets the sandbox can read, with their paths, sizes, columns and types"
	if t.canSelect {
		d += ", and the status of datasets selected with select_dataset"
	}
	return d + ". Call it before writing code that reads data."
}

func formatListing(l session.Listing, codeTool string) string {
	var b strings.Builder
	if len(l.Files) > 0 {
		b.WriteString("Dataset files (read them from " + codeTool + " at the path shown):\n")
		for _, f := range l.Files {
			fmt.Fprintf(&b, "- %s\n  path: %s\n", f.Summary(), name(f.Path))
		}
	}
	if len(l.Statuses) > 0 {
		b.WriteString("Selected datasets:\n")
		for _, r := range l.Statuses {
			fmt.Fprintf(&b, "- %s\n", formatRecord(r, path.Join(session.DatasetsDir, r.Name)))
		}
	}
	if l.Message != "" {
		b.WriteString(l.Message + "\n")
	}
	if b.Len() == 0 {
		return "No datasets are available."
	}
	return b.String()
}

func formatRecord(r datasets.Record, at string) string {
	id := name(r.DatasetID)
	switch r.Status {
	case datasets.StatusLoaded:
		return fmt.Sprintf("%s: loaded at %s (%s)", id, name(at), size(r.Size))
	case datasets.StatusFailed:
		return fmt.Sprintf("%s: could not be loaded: %s", id, r.Reason)
	}
	return fmt.Sprintf("%s: %s", id, strings.ToLower(string(r.Status)))
}

func (t *toolset) selectDataset() Tool {
	return Tool{
		Name: "select_dataset",
		Description: "Load a dataset by its id into the sandbox, under " + session.DatasetsDir + "/. " +
			"The reply says where code can read it, or why it could not be loaded. Loading it again is harmless; " +
			"set refresh to fetch it again from its source when it may have changed.",
		Schema: []byte(`{"type":"object","properties":{` +
			`"dataset_id":{"type":"string","description":"the dataset's id"},` +
			`"refresh":{"type":"boolean","description":"fetch it again from its source even if it was loaded before (default false)"}},` +
			`"required":["dataset_id"],"additionalProperties":false}`),
		Call: func(ctx context.Context, input json.RawMessage) (string, error) {
			var in struct {
				DatasetID string `json:"dataset_id"`
				Refresh   bool   `json:"refresh"`
			}
			if msg := decode(input, &in, selectExample); msg != "" {
				return msg, nil
			}
			if strings.TrimSpace(in.DatasetID) == "" {
				return invalid(`"dataset_id" is required and must not be empty`, selectExample), nil
			}
			key, err := t.key(ctx)
			if err != nil {
				return "", err
			}
			var opts []session.SelectOption
			if in.Refresh {
				opts = append(opts, session.Refresh())
			}
			sel, err := t.m.SelectDataset(ctx, key, in.DatasetID, opts...)
			switch {
			case errors.Is(err, datasets.ErrInvalidID):
				return invalid(fmt.Sprintf("%q is not a valid dataset id", cut(in.DatasetID, 200)), selectExample), nil
			case errors.Is(err, session.ErrNoDatasetSource):
				return "Datasets cannot be selected here: no dataset source is configured. Use list_datasets to see what is available.", nil
			case err != nil:
				return "", fmt.Errorf("select dataset: %w", err)
			}
			return cut("Dataset "+formatRecord(sel.Record, sel.Path)+".", t.opts.MaxReplyBytes), nil
		},
	}
}

func (t *toolset) exportDataset() Tool {
	return Tool{
		Name: "export_dataset",
		Description: "Save a file from the sandbox for the user: give its path under /session " +
			"(for example a result under /session/data). The reply gives its download URL.",
		Schema: []byte(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"absolute path of a file under /session"}},` +
			`"required":["path"],"additionalProperties":false}`),
		Call: func(ctx context.Context, input json.RawMessage) (string, error) {
			var in struct {
				Path string `json:"path"`
			}
			if msg := decode(input, &in, exportExample); msg != "" {
				return msg, nil
			}
			if in.Path == "" {
				return invalid(`"path" is required and must not be empty`, exportExample), nil
			}
			clean := path.Clean(in.Path)
			if !strings.HasPrefix(clean, "/session/") || strings.ContainsRune(in.Path, 0) || slices.Contains(strings.Split(in.Path, "/"), "..") {
				return invalid(fmt.Sprintf("%s is not a file under /session", name(cut(in.Path, 200))), exportExample), nil
			}
			key, err := t.key(ctx)
			if err != nil {
				return "", err
			}
			exp, err := t.m.Export(ctx, key, clean)
			switch {
			case errors.Is(err, session.ErrNotFound):
				return "Nothing to export: the sandbox has not run any code yet.", nil
			case err != nil:
				// The cause is said in the sandbox's terms: the error
				// itself can name host folders (EXPORT_DIR, a BIND
				// session's), which are the operator's, not the model's.
				why := exportWhy(err)
				if why == "" {
					return "", fmt.Errorf("export: %w", err)
				}
				return cut(fmt.Sprintf("Could not export %s: %s.", name(clean), why), t.opts.MaxReplyBytes), nil
			}
			a := exp.Artifact
			return cut(fmt.Sprintf("Exported %s (%s) as %s: %s", name(clean), size(a.Size), name(a.Name), a.URL), t.opts.MaxReplyBytes), nil
		},
	}
}

// exportWhy is why an export failed, for the model, or "" when the cause is
// the system's or the host's (a Go error for the caller).
func exportWhy(err error) string {
	switch {
	case systemFailure(err):
		return ""
	case errors.Is(err, session.ErrNoSpace):
		return "no room is left on the host for exports; tell the user"
	case errors.Is(err, session.ErrFileNotFound), errors.Is(err, fs.ErrNotExist):
		return "there is no such file"
	case errors.Is(err, session.ErrIsDir):
		return "it is a folder: export the files in it one by one"
	case errors.Is(err, session.ErrNotRegular):
		return "it is not a regular file (a link, named pipe, socket or device)"
	case errors.Is(err, session.ErrPermission):
		return "permission denied"
	case errors.Is(err, session.ErrFileTooLarge), errors.Is(err, session.ErrBadPath):
		var fe *session.FileError
		if errors.As(err, &fe) {
			return fe.Err.Error()
		}
	}
	return ""
}

// systemFailure tells errors of the system (engine, manager, caller's
// context) from those of the request, such as a file that does not exist.
func systemFailure(err error) bool {
	for _, target := range []error{
		session.ErrClosed, session.ErrUnavailable, session.ErrSessionLost, session.ErrImageMissing,
		session.ErrImageStale, session.ErrInvalidKey, context.Canceled, context.DeadlineExceeded,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
