package native

import (
	"time"

	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// The JSON the API speaks (openapi.yaml describes each). Session keys never
// appear: a session is the caller's name for it.

// Statuses of an execution.
const (
	statusRunning   = "running"
	statusCompleted = "completed"
)

type execRequest struct {
	Code     string   `json:"code"`
	ID       string   `json:"id,omitempty"`
	TimeoutS *float64 `json:"timeout_s,omitempty"`
}

type execution struct {
	ID              string              `json:"id"`
	Session         string              `json:"session"`
	Status          string              `json:"status"`
	ExecutionCount  int                 `json:"execution_count"`
	Stdout          string              `json:"stdout"`
	Stderr          string              `json:"stderr"`
	Results         []map[string]string `json:"results"`
	Error           *kernel.Exception   `json:"error"`
	TimedOut        bool                `json:"timed_out"`
	Interrupted     bool                `json:"interrupted"`
	KernelRestarted bool                `json:"kernel_restarted"`
	StateLost       bool                `json:"state_lost"`
	RestartReason   string              `json:"restart_reason,omitempty"`
	Truncated       map[string]int64    `json:"truncated,omitempty"`
	Replayed        bool                `json:"replayed"`
	DurationMS      float64             `json:"duration_ms"`
	Artifacts       []session.Artifact  `json:"artifacts"`
	Skipped         []session.Skipped   `json:"skipped_artifacts,omitempty"`
	Warnings        []string            `json:"warnings,omitempty"`
}

func toExecution(name string, r *session.Result) execution {
	results := make([]map[string]string, 0, len(r.Outputs))
	for _, o := range r.Outputs {
		results = append(results, o.Data)
	}
	arts := r.Artifacts
	if arts == nil {
		arts = []session.Artifact{}
	}
	return execution{
		ID: r.ID, Session: name, Status: statusCompleted, ExecutionCount: r.ExecutionCount,
		Stdout: r.Stdout, Stderr: r.Stderr, Results: results, Error: r.Error,
		TimedOut: r.TimedOut, Interrupted: r.Interrupted, KernelRestarted: r.KernelRestarted,
		StateLost: r.StateLost, RestartReason: r.RestartReason, Truncated: r.Truncated,
		Replayed: r.Replayed, DurationMS: float64(r.Duration.Microseconds()) / 1000,
		Artifacts: arts, Skipped: r.SkippedArtifacts, Warnings: r.Warnings,
	}
}

// pending is an execution still running.
type pending struct {
	ID      string `json:"id"`
	Session string `json:"session"`
	Status  string `json:"status"`
}

type sessionInfo struct {
	Name           string            `json:"name"`
	State          string            `json:"state"`
	Created        time.Time         `json:"created"`
	LastUsed       time.Time         `json:"last_used"`
	Expires        time.Time         `json:"expires,omitzero"`
	Paused         time.Time         `json:"paused,omitzero"`
	ExecutionCount int               `json:"execution_count"`
	MemoryBytes    int64             `json:"memory_bytes"`
	Storage        string            `json:"storage"`
	Image          string            `json:"image,omitempty"`
	Limits         *session.Limits   `json:"limits,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	StopReason     string            `json:"stop_reason,omitempty"`
}

func toSessionInfo(name string, i session.Info) sessionInfo {
	return sessionInfo{
		Name: name, State: i.State, Created: i.Created, LastUsed: i.LastUsed,
		Expires: i.Expires, Paused: i.Paused, ExecutionCount: i.ExecutionCount,
		MemoryBytes: i.MemoryBytes, Storage: i.Storage, Image: i.Image,
		Limits: i.Limits, Labels: i.Labels, StopReason: i.StopReason,
	}
}

type artifactList struct {
	Artifacts []session.Artifact `json:"artifacts"`
}

type datasetListing struct {
	Access   string          `json:"access"`
	Files    []datasetFile   `json:"files"`
	Selected []datasetStatus `json:"selected"`
	Message  string          `json:"message,omitempty"`
}

type datasetFile struct {
	Name      string       `json:"name"`
	Path      string       `json:"path"` // in the sandbox
	Source    string       `json:"source"`
	Size      int64        `json:"size"`
	Format    string       `json:"format"`
	Parquet   *parquetInfo `json:"parquet,omitempty"`
	CSVHeader []string     `json:"csv_header,omitempty"`
	Problem   string       `json:"problem,omitempty"`
}

type parquetInfo struct {
	Rows      int64    `json:"rows"`
	RowGroups int      `json:"row_groups"`
	Columns   []column `json:"columns"`
}

type column struct {
	Name     string   `json:"name"`
	Path     string   `json:"path"`
	Type     string   `json:"type"`
	Nullable bool     `json:"nullable"`
	Repeated bool     `json:"repeated"`
	Children []column `json:"children,omitempty"`
}

func toColumns(cs []datasets.Column) []column {
	out := make([]column, 0, len(cs))
	for _, c := range cs {
		out = append(out, column{Name: c.Name, Path: c.Path, Type: c.Type, Nullable: c.Nullable,
			Repeated: c.Repeated, Children: toColumns(c.Children)})
	}
	return out
}

type datasetStatus struct {
	DatasetID string    `json:"dataset_id"`
	Name      string    `json:"name"`
	Path      string    `json:"path"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason,omitempty"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256,omitempty"`
	Updated   time.Time `json:"updated,omitzero"`
	Fetched   *bool     `json:"fetched,omitempty"` // select only: fetched now
}

func toDatasetStatus(r datasets.Record) datasetStatus {
	return datasetStatus{DatasetID: r.DatasetID, Name: r.Name, Path: session.DatasetsDir + "/" + r.Name,
		Status: string(r.Status), Reason: r.Reason, Size: r.Size, SHA256: r.SHA256, Updated: r.Updated}
}

func toListing(l session.Listing) datasetListing {
	out := datasetListing{Access: string(l.Access), Files: []datasetFile{}, Selected: []datasetStatus{}, Message: l.Message}
	for _, f := range l.Files {
		df := datasetFile{Name: f.Name, Path: f.Path, Source: f.Source, Size: f.Size, Format: f.Format,
			CSVHeader: f.CSVHeader, Problem: f.Problem}
		if p := f.Parquet; p != nil {
			df.Parquet = &parquetInfo{Rows: p.Rows, RowGroups: p.RowGroups, Columns: toColumns(p.Columns)}
		}
		out.Files = append(out.Files, df)
	}
	for _, r := range l.Statuses {
		out.Selected = append(out.Selected, toDatasetStatus(r))
	}
	return out
}

type selectRequest struct {
	Refresh bool `json:"refresh,omitempty"`
}
