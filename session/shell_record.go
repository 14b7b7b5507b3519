package session

import (
	"context"
	"encoding/json"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
)

// recordCommand adds a finished command to the history, with the trace id
// of the span in ctx, and, in BIND mode, to session.log. A failure loses no
// result, so it becomes a warning.
func (m *Manager) recordCommand(ctx context.Context, e *entry, count int, res *CommandResult) {
	ctx = context.WithoutCancel(ctx)
	code := res.ExitCode
	traceID := traceIDOf(ctx)
	rec := &store.Execution{
		Namespace:      m.ns,
		SessionID:      e.id,
		SessionKey:     e.key,
		ExecID:         res.ID,
		ExecutionCount: count,
		Code:           res.Line,
		Stdout:         res.Stdout,
		Stderr:         res.Stderr,
		Started:        res.Started,
		Duration:       res.Duration,
		TimedOut:       res.TimedOut,
		Interrupted:    res.Interrupted,
		ExitCode:       &code,
		TraceID:        traceID,
	}
	if err := m.store.RecordCommand(ctx, rec); err != nil {
		res.Warnings = append(res.Warnings, "the history did not record this command ("+storageTrouble(err, "ARTIFACTS_DB", m.cfg.ArtifactsDB)+")")
		m.metrics.dbFailed("record_command")
		m.log.WarnContext(ctx, "record command", "session_key", e.key, "session_id", e.id, "exec_id", res.ID, "err", err)
	}
	if m.cfg.SessionStorage != config.StorageBind {
		return
	}
	line, err := json.Marshal(LogEntry{
		Time:           res.Started.UTC(),
		ID:             res.ID,
		ExecutionCount: count,
		Code:           res.Line,
		Stdout:         res.Stdout,
		Stderr:         res.Stderr,
		DurationMS:     float64(res.Duration.Microseconds()) / 1000,
		Artifacts:      []Artifact{},
		TimedOut:       res.TimedOut,
		Kind:           store.KindShell,
		ExitCode:       &code,
		TraceID:        traceID,
	})
	if err == nil {
		err = appendRecord(m.dir(e), LogFile, line)
	}
	if err != nil {
		m.log.Warn("write session log", "session_id", e.id, "err", err)
	}
}
