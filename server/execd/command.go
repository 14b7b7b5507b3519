package execd

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/session"
)

// runCommandRequest is OpenSandbox's RunCommandRequest.
type runCommandRequest struct {
	Command    string            `json:"command"`
	Cwd        string            `json:"cwd"`
	Background bool              `json:"background"`
	Timeout    int64             `json:"timeout"` // milliseconds
	UID        *int              `json:"uid"`
	GID        *int              `json:"gid"`
	Envs       map[string]string `json:"envs"`
}

func (q *runCommandRequest) command() (session.Command, error) {
	switch {
	case strings.TrimSpace(q.Command) == "":
		return session.Command{}, errorf(http.StatusBadRequest, codeInvalidRequest, "invalid request: command is empty")
	case q.UID != nil || q.GID != nil:
		return session.Command{}, errorf(http.StatusBadRequest, codeNotSupported, "uid and gid are not supported: commands run as the sandbox user")
	case q.Timeout < 0:
		return session.Command{}, errorf(http.StatusBadRequest, codeInvalidRequest, "invalid request: timeout %d ms is negative", q.Timeout)
	}
	return session.Command{Line: q.Command, Cwd: q.Cwd, Env: q.Envs, Timeout: time.Duration(q.Timeout) * time.Millisecond}, nil
}

// runCommand runs a command: in the foreground, its output streams as
// it comes; in the background, the stream says its id and ends.
func (h *Handler) runCommand(c *call) error {
	var q runCommandRequest
	if err := h.decode(c, &q); err != nil {
		return err
	}
	cmd, err := q.command()
	if err != nil {
		return err
	}
	start := time.Now()
	if q.Background {
		// The command outlives the request: its context is not the
		// request's (StartCommand ties it to the Manager).
		id, err := h.m.StartCommand(c.r.Context(), c.key, cmd)
		if err != nil {
			return err
		}
		s := h.startStream(c)
		s.send(event{Type: evInit, Text: text(id)})
		s.send(event{Type: evComplete, ExecutionTime: millis(time.Since(start))})
		s.close()
		return nil
	}

	// Admitted before the stream starts: a tenant at its quota hears 429.
	admission, err := h.m.Admit(c.r.Context(), c.key)
	if err != nil {
		return err
	}
	defer admission.Release()
	cmd.Admission = admission
	id := h.newID()
	ctx, cancel := context.WithCancel(c.r.Context())
	defer cancel()
	rec := h.fg.add(c.key, id, q.Command, start, cancel)
	s := h.startStream(c)
	s.send(event{Type: evInit, Text: text(id)})
	out := &lines{emit: func(t string) { s.send(event{Type: evStdout, Text: text(t)}) }}
	errs := &lines{emit: func(t string) { s.send(event{Type: evStderr, Text: text(t)}) }}
	cmd.Stdout, cmd.Stderr = out, errs
	res, err := h.m.Run(ctx, c.key, cmd)
	out.flush()
	errs.flush()
	switch {
	case err != nil:
		// The stream began: the failure goes out as its error event,
		// the server's own failures without their causes (logged).
		e := publicErr(c, err)
		if e.Status >= 500 {
			h.log.Error("execd command failed", "sandbox", c.id, "status", e.Status, "err", err)
		}
		msg := e.Message
		rec.finish(-1, msg)
		s.send(event{Type: evError, Error: &eventError{Name: "CommandExecError", Value: msg, Traceback: []string{msg}}})
	case res.ExitCode != 0:
		why := commandWhy(res)
		rec.finish(res.ExitCode, why)
		s.send(event{Type: evError, Error: &eventError{Name: "CommandExecError", Value: strconv.Itoa(res.ExitCode), Traceback: []string{why}}})
	default:
		rec.finish(0, "")
		s.send(event{Type: evComplete, ExecutionTime: millis(res.Duration)})
	}
	s.close()
	return nil
}

// commandWhy says how a command that failed ended.
func commandWhy(res *session.CommandResult) string {
	switch {
	case res.TimedOut:
		return fmt.Sprintf("timed out (killed, exit status %d)", res.ExitCode)
	case res.Interrupted:
		return fmt.Sprintf("interrupted (killed, exit status %d)", res.ExitCode)
	case res.Signal != "":
		return fmt.Sprintf("killed by %s (exit status %d)", res.Signal, res.ExitCode)
	}
	return fmt.Sprintf("exit status %d", res.ExitCode)
}

// interruptCommand kills a running command, foreground or background.
func (h *Handler) interruptCommand(c *call) error {
	id := c.r.URL.Query().Get("id")
	if id == "" {
		return errorf(http.StatusBadRequest, codeMissingQuery, "missing query parameter 'id'")
	}
	if rec := h.fg.get(c.key, id); rec != nil {
		rec.cancel()
		rec.wait(c.r.Context())
		c.w.WriteHeader(http.StatusOK)
		return nil
	}
	if err := h.m.KillCommand(c.r.Context(), c.key, id); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

// commandStatusResponse is OpenSandbox's CommandStatusResponse.
type commandStatusResponse struct {
	ID         string     `json:"id"`
	Content    string     `json:"content"`
	Running    bool       `json:"running"`
	ExitCode   *int       `json:"exit_code"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

func (h *Handler) commandStatus(c *call) error {
	id := c.param()
	if rec := h.fg.get(c.key, id); rec != nil {
		return writeJSON(c.w, rec.status())
	}
	st, err := h.m.CommandStatus(c.r.Context(), c.key, id)
	if err != nil {
		return err
	}
	out := commandStatusResponse{ID: st.ID, Content: st.Line, Running: st.Running, StartedAt: st.Started.UTC()}
	switch {
	case st.Result != nil:
		code := st.Result.ExitCode
		out.ExitCode = &code
		end := st.Result.Started.Add(st.Result.Duration).UTC()
		out.FinishedAt = &end
		if code != 0 {
			out.Error = commandWhy(st.Result)
		}
	case st.Err != nil:
		code := -1
		out.ExitCode = &code
		out.Error = st.Err.Error()
	}
	return writeJSON(c.w, out)
}

// commandLogs answers what a background command wrote from a byte
// cursor on, as plain text, with the next cursor in CursorHeader.
func (h *Handler) commandLogs(c *call) error {
	id := c.param()
	var cursor int64
	if v := c.r.URL.Query().Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "invalid cursor %q: want a whole number, 0 or more", v)
		}
		cursor = n
	}
	if h.fg.get(c.key, id) != nil {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "command %s is not running in background: its output was streamed", id)
	}
	logs, err := h.m.CommandLogs(c.r.Context(), c.key, id, cursor)
	if err != nil {
		return err
	}
	var b strings.Builder
	if logs.Skipped > 0 {
		fmt.Fprintf(&b, "[agentbox: %d bytes of output were not kept here]\n", logs.Skipped)
	}
	for _, ch := range logs.Chunks {
		b.WriteString(ch.Data)
	}
	c.w.Header().Set(CursorHeader, strconv.FormatInt(logs.Next, 10))
	c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	c.w.WriteHeader(http.StatusOK)
	_, err = c.w.Write([]byte(b.String()))
	return err
}

// foreground remembers this handler's foreground commands, so that they
// can be interrupted by id while they stream and their status asked
// after. It keeps the running ones and the last keepFinished finished.
type foreground struct {
	mu       sync.Mutex
	byID     map[string]*fgCommand
	finished []string
}

const keepFinished = 1000

type fgCommand struct {
	key, id, line string
	started       time.Time
	cancel        context.CancelFunc
	done          chan struct{}
	fg            *foreground

	// Set by finish.
	exitCode int
	err      string
	ended    time.Time
}

func newForeground() *foreground { return &foreground{byID: map[string]*fgCommand{}} }

func (f *foreground) add(key, id, line string, started time.Time, cancel context.CancelFunc) *fgCommand {
	rec := &fgCommand{key: key, id: id, line: line, started: started, cancel: cancel, done: make(chan struct{}), fg: f}
	f.mu.Lock()
	f.byID[id] = rec
	f.mu.Unlock()
	return rec
}

// get returns command id when it belongs to the session key.
func (f *foreground) get(key, id string) *fgCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := f.byID[id]
	if rec == nil || rec.key != key {
		return nil
	}
	return rec
}

func (r *fgCommand) finish(exitCode int, msg string) {
	f := r.fg
	f.mu.Lock()
	r.exitCode, r.err, r.ended = exitCode, msg, time.Now()
	close(r.done)
	f.finished = append(f.finished, r.id)
	if len(f.finished) > keepFinished {
		delete(f.byID, f.finished[0])
		f.finished = f.finished[1:]
	}
	f.mu.Unlock()
}

// wait waits until the command has ended, or ctx has.
func (r *fgCommand) wait(ctx context.Context) {
	select {
	case <-r.done:
	case <-ctx.Done():
	}
}

func (r *fgCommand) status() commandStatusResponse {
	out := commandStatusResponse{ID: r.id, Content: r.line, Running: true, StartedAt: r.started.UTC()}
	select {
	case <-r.done:
	default:
		return out
	}
	r.fg.mu.Lock()
	defer r.fg.mu.Unlock()
	code, end := r.exitCode, r.ended.UTC()
	out.Running, out.ExitCode, out.FinishedAt, out.Error = false, &code, &end, r.err
	return out
}
