package session

import (
	"encoding/json"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// Result is everything one execution produced. A Python exception is data in
// Error, not a Go error.
type Result struct {
	Session         string            // the session key
	ID              string            // the execution id
	ExecutionCount  int               // as in a notebook: 1 for the first execution of a kernel
	Stdout          string            // capped by MAX_OUTPUT_BYTES, head and tail kept
	Stderr          string            //
	Outputs         []kernel.Output   // rich results: the trailing expression, display() calls, figures
	Error           *kernel.Exception // nil when the code ran without raising
	TimedOut        bool              // the timeout or the caller's deadline interrupted the code
	Interrupted     bool              // an explicit interrupt or cancellation stopped it
	KernelRestarted bool              // the kernel restarted during or before this execution
	StateLost       bool              // variables and imports from before are gone
	RestartReason   string            // why the kernel restarted, when it did
	Truncated       map[string]int64  // stream name -> bytes cut from the middle
	Replayed        bool              // recorded earlier: the code did not run again
	Duration        time.Duration
	Artifacts       []Artifact // files the code wrote under /session/artifacts, and its figures
	// SkippedArtifacts lists the files that were not stored (too large, too
	// many, symbolic links...) with the reason.
	SkippedArtifacts []Skipped
	// Warnings say what went wrong around the execution without changing
	// its result: the history could not record it, or files could not be
	// stored, yet (a busy or full database, a full disk). Each is retried
	// on the session's next call.
	Warnings []string
}

// Artifact is a file an execution wrote under /session/artifacts, stored and
// downloadable through URL for a limited time.
type Artifact struct {
	ID     string `json:"id"`
	Name   string `json:"name"` // path relative to /session/artifacts
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	MIME   string `json:"mime"`
	URL    string `json:"url"`
}

// MarshalJSON writes the shape `agentbox exec --json` prints: rich results
// as bare MIME bundles ({"text/plain": "42"}) and the duration in
// milliseconds.
func (r *Result) MarshalJSON() ([]byte, error) {
	bundles := make([]map[string]string, 0, len(r.Outputs))
	for _, o := range r.Outputs {
		bundles = append(bundles, o.Data)
	}
	arts := r.Artifacts
	if arts == nil {
		arts = []Artifact{}
	}
	return json.Marshal(struct {
		Session         string              `json:"session"`
		ID              string              `json:"id"`
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
		Artifacts       []Artifact          `json:"artifacts"`
		Skipped         []Skipped           `json:"skipped_artifacts,omitempty"`
		Warnings        []string            `json:"warnings,omitempty"`
	}{
		r.Session, r.ID, r.ExecutionCount, r.Stdout, r.Stderr, bundles, r.Error,
		r.TimedOut, r.Interrupted, r.KernelRestarted, r.StateLost, r.RestartReason,
		r.Truncated, r.Replayed, float64(r.Duration.Microseconds()) / 1000, arts, r.SkippedArtifacts, r.Warnings,
	})
}

func fromKernel(key string, kr *kernel.Result) *Result {
	return &Result{
		Session:         key,
		ID:              kr.ID,
		ExecutionCount:  kr.ExecutionCount,
		Stdout:          kr.Stdout,
		Stderr:          kr.Stderr,
		Outputs:         kr.Outputs,
		Error:           kr.Error,
		TimedOut:        kr.TimedOut,
		Interrupted:     kr.Interrupted,
		KernelRestarted: kr.KernelRestarted,
		StateLost:       kr.StateLost,
		RestartReason:   kr.RestartReason,
		Truncated:       kr.Truncated,
		Replayed:        kr.Replayed,
		Duration:        kr.Duration,
		Artifacts:       []Artifact{},
	}
}
