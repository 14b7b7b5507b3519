package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/tools"
)

const noArgsSchema = `{"type":"object","properties":{},"additionalProperties":false}`

// lifecycleTools are the tools the tools package does not have:
// session_info and reset_session.
func (s *server) lifecycleTools() []tools.Tool {
	return []tools.Tool{
		{
			Name: "session_info",
			Description: "Describe the sandbox session: its state (running, paused, stopped), when it was created and last used, " +
				"how many executions ran, its memory use, limits and expiry. It does not start a sandbox.",
			Schema: []byte(noArgsSchema),
			Call:   s.sessionInfo,
		},
		{
			Name: "reset_session",
			Description: "Throw the sandbox session away: its Python state (variables, imports) and its files under /session are gone, " +
				"and the next call starts a fresh sandbox. Use it when the state is broken beyond repair or the user asks for a clean start. " +
				"Artifacts already saved stay downloadable.",
			Schema: []byte(noArgsSchema),
			Call:   s.resetSession,
		},
	}
}

// noArgs checks that input has no field (the session is taken already),
// returning the explanation for the model when it has one.
func noArgs(input json.RawMessage) string {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(input, &args); err != nil || args == nil {
		return `Invalid input: the input must be a JSON object. Expected a JSON object like {"session": "analysis"} or {}.`
	}
	for k := range args {
		return fmt.Sprintf(`Invalid input: unknown field %s; the only argument is "session". Expected a JSON object like {"session": "analysis"} or {}.`, strconv.Quote(k))
	}
	return ""
}

// infoView is session_info's reply: a session.Info without what belongs to
// the host (the tenant's key, the container).
type infoView struct {
	Session        string            `json:"session"`
	State          string            `json:"state"`
	Created        time.Time         `json:"created"`
	LastUsed       time.Time         `json:"last_used"`
	ExecutionCount int               `json:"execution_count"`
	MemoryBytes    int64             `json:"memory_bytes,omitempty"`
	Storage        string            `json:"storage"`
	Expires        time.Time         `json:"expires,omitzero"`
	Paused         time.Time         `json:"paused,omitzero"`
	Image          string            `json:"image,omitempty"`
	Limits         *session.Limits   `json:"limits,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	StopReason     string            `json:"stop_reason,omitempty"`
}

func (s *server) sessionInfo(ctx context.Context, input json.RawMessage) (string, error) {
	if msg := noArgs(input); msg != "" {
		return msg, nil
	}
	cs, ok := sessionOf(ctx)
	if !ok {
		return "", errNoSession
	}
	in, err := s.m.Info(ctx, cs.key)
	if errors.Is(err, session.ErrNotFound) {
		outcomeOf(ctx).record(nil) // an answer, not a failure
		return fmt.Sprintf("Session %s has no sandbox yet: the first %s, run_shell or write_file call starts it.",
			strconv.Quote(cs.name), codeTool), nil
	}
	if err != nil {
		return "", fmt.Errorf("session info: %w", err)
	}
	outcomeOf(ctx).record(nil)
	b, err := json.MarshalIndent(infoView{
		Session: cs.name, State: in.State, Created: in.Created, LastUsed: in.LastUsed,
		ExecutionCount: in.ExecutionCount, MemoryBytes: in.MemoryBytes, Storage: in.Storage,
		Expires: in.Expires, Paused: in.Paused, Image: in.Image, Limits: in.Limits,
		Labels: in.Labels, StopReason: in.StopReason,
	}, "", "  ")
	if err != nil {
		return "", fmt.Errorf("session info: encode: %w", err)
	}
	return string(b), nil
}

func (s *server) resetSession(ctx context.Context, input json.RawMessage) (string, error) {
	if msg := noArgs(input); msg != "" {
		return msg, nil
	}
	cs, ok := sessionOf(ctx)
	if !ok {
		return "", errNoSession
	}
	err := s.m.Stop(ctx, cs.key)
	if errors.Is(err, session.ErrNotFound) {
		outcomeOf(ctx).record(nil) // already as a reset leaves it
		return fmt.Sprintf("Session %s has no sandbox: there was nothing to reset. The next call starts a fresh one.", strconv.Quote(cs.name)), nil
	}
	if err != nil {
		return "", fmt.Errorf("reset session: %w", err)
	}
	outcomeOf(ctx).record(nil)
	return fmt.Sprintf("Session %s was reset: its Python state and files are gone, and the next call starts a fresh sandbox. "+
		"Artifacts saved before stay listed by list_artifacts.", strconv.Quote(cs.name)), nil
}
