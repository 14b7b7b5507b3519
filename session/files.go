package session

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// The debugging files BIND mode writes into the session folder (the names
// LangGraph-Sandbox uses).
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
	Error          *kernel.Exception `json:"error"`
	DurationMS     float64           `json:"duration_ms"`
	Artifacts      []Artifact        `json:"artifacts"`
	TimedOut       bool              `json:"timed_out,omitempty"`
	StateLost      bool              `json:"state_lost,omitempty"`
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
func (m *Manager) writeFiles(ctx context.Context, e *entry, code string, started time.Time, res *Result) {
	line, err := json.Marshal(LogEntry{
		Time:           started.UTC(),
		ID:             res.ID,
		ExecutionCount: res.ExecutionCount,
		Code:           code,
		Stdout:         res.Stdout,
		Stderr:         res.Stderr,
		Error:          res.Error,
		DurationMS:     float64(res.Duration.Microseconds()) / 1000,
		Artifacts:      res.Artifacts,
		TimedOut:       res.TimedOut,
		StateLost:      res.StateLost,
	})
	if err == nil {
		err = appendLine(filepath.Join(m.dir(e), LogFile), line)
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
		err = writeJSON(filepath.Join(m.dir(e), StateFile), st)
	}
	if err != nil {
		m.log.Warn("write python state", "session_id", e.id, "err", err)
	}
}

func (m *Manager) writeMetadata(e *entry, lastUsed time.Time) {
	err := writeJSON(filepath.Join(m.dir(e), MetadataFile), Metadata{
		Key:            e.key,
		ID:             e.id,
		Container:      e.containerID,
		Image:          m.cfg.SandboxImage,
		Created:        e.created.UTC(),
		LastUsed:       lastUsed.UTC(),
		ExecutionCount: e.execCount,
		Limits:         m.limits(),
	})
	if err != nil {
		m.log.Warn("write session metadata", "session_id", e.id, "err", err)
	}
}

// appendLine appends one line in a single write, so that a reader never sees
// half a line from this process.
func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeJSON replaces path atomically: a reader sees the old file or the new
// one, never a mix.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}
