package session

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// The debugging files BIND mode writes into the session folder,
// SESSIONS_ROOT/<session id>/ (the names LangGraph-Sandbox uses), beside
// WorkspaceDir, never inside it (see records.go).
const (
	LogFile      = "session.log"           // one JSON object per execution
	MetadataFile = "session_metadata.json" // the session's record
	StateFile    = "python_state.json"     // the kernel's namespace summary
)

// LogEntry is one line of session.log.
type LogEntry struct {
	Time           time.Time         `json:"time"`
	ID             string            `json:"id"`
	ExecutionCount int               `json:"execution_count"`
	Code           string            `json:"code"`
	Stdout         string            `json:"stdout"`
	Stderr         string            `json:"stderr"`
	Results        []kernel.Output   `json:"results,omitempty"` // rich results; images over 64 KiB of base64 replaced by a note
	Error          *kernel.Exception `json:"error"`
	DurationMS     float64           `json:"duration_ms"`
	Artifacts      []Artifact        `json:"artifacts"`
	TimedOut       bool              `json:"timed_out,omitempty"`
	StateLost      bool              `json:"state_lost,omitempty"`
	// Kind is "shell" for a shell command (Code holds its line), absent
	// for Python.
	Kind     string `json:"kind,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"` // a shell command's
	// TraceID is the W3C trace id the execution ran in, when one was
	// sampled.
	TraceID string `json:"trace_id,omitempty"`
}

// maxLogImage is the most base64 text of one image a session.log line
// keeps, as the history database does; a larger image is replaced by a
// note (ARTIFACT_FIGURES stores PNG figures whole, as artifacts).
const maxLogImage = 64 << 10

// logOutputs returns outputs with every image over maxLogImage replaced by
// the note the history database uses; outputs itself is not changed.
func logOutputs(outputs []kernel.Output) []kernel.Output {
	out := make([]kernel.Output, len(outputs))
	for i, o := range outputs {
		out[i] = o
		copied := false
		for mime, v := range o.Data {
			if len(v) <= maxLogImage || !strings.HasPrefix(mime, "image/") {
				continue
			}
			if !copied { // the caller's map stays whole
				out[i].Data, copied = maps.Clone(o.Data), true
			}
			out[i].Data[mime] = fmt.Sprintf("[%s: %d bytes, not kept in history]", mime, len(v))
		}
	}
	return out
}

// Metadata is session_metadata.json.
type Metadata struct {
	Key            string            `json:"key"`
	ID             string            `json:"id"`
	Container      string            `json:"container"`
	Image          string            `json:"image"`
	Created        time.Time         `json:"created"`
	LastUsed       time.Time         `json:"last_used"`
	ExecutionCount int               `json:"execution_count"`
	Limits         map[string]string `json:"limits"`
}

func (m *Manager) dir(e *entry) string { return filepath.Join(m.cfg.SessionsRoot, e.id) }

// writeFiles appends to session.log and rewrites the metadata and the
// namespace summary after an execution.
func (m *Manager) writeFiles(ctx context.Context, e *entry, code string, started time.Time, res *Result, traceID string) {
	line, err := json.Marshal(LogEntry{
		Time:           started.UTC(),
		ID:             res.ID,
		ExecutionCount: res.ExecutionCount,
		Code:           code,
		Stdout:         res.Stdout,
		Stderr:         res.Stderr,
		Results:        logOutputs(res.Outputs),
		Error:          res.Error,
		DurationMS:     float64(res.Duration.Microseconds()) / 1000,
		Artifacts:      res.Artifacts,
		TimedOut:       res.TimedOut,
		StateLost:      res.StateLost,
		TraceID:        traceID,
	})
	if err == nil {
		// On the host's disk, not the session's: past the reserve the
		// line is left out (the database's history has the execution).
		if rerr := m.checkReserve(int64(len(line)) + 1); rerr != nil {
			err = fmt.Errorf("line left out: the disk of SESSIONS_ROOT is at DISK_RESERVE_MB=%d MiB: %w", m.cfg.DiskReserveMB, ErrNoSpace)
		}
	}
	if err == nil {
		err = appendRecord(m.dir(e), LogFile, line)
	}
	if err != nil {
		m.log.Warn("write session log", "session_id", e.id, "err", err)
	}
	m.writeMetadata(e, time.Now())
	if e.client == nil {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := e.client.Inspect(ictx)
	if err == nil {
		err = writeRecord(m.dir(e), StateFile, st)
	}
	if err != nil {
		m.log.Warn("write python state", "session_id", e.id, "err", err)
	}
}

func (m *Manager) writeMetadata(e *entry, lastUsed time.Time) {
	err := writeRecord(m.dir(e), MetadataFile, Metadata{
		Key:            e.key,
		ID:             e.id,
		Container:      e.containerID,
		Image:          e.cr.imageRef(m.cfg.SandboxImage),
		Created:        e.created.UTC(),
		LastUsed:       lastUsed.UTC(),
		ExecutionCount: e.execCount,
		Limits:         m.limitsOf(e.cr),
	})
	if err != nil {
		m.log.Warn("write session metadata", "session_id", e.id, "err", err)
	}
}
