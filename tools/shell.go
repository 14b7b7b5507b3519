package tools

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"encoding/json"

	"github.com/agentbox/agentbox/session"
)

// ShellRunner is the optional capability of a Manager to run shell
// commands in a session's container (*session.Manager has it). New adds
// run_shell when the Manager has it.
type ShellRunner interface {
	Run(ctx context.Context, key string, cmd session.Command) (*session.CommandResult, error)
}

const shellExample = `{"command": "ls -la /session | head", "timeout_s": 30}`

type shellInput struct {
	Command  string   `json:"command"`
	Cwd      string   `json:"cwd"`
	TimeoutS *float64 `json:"timeout_s"`
}

func (t *toolset) runShell(r ShellRunner) Tool {
	return Tool{
		Name: "run_shell",
		Description: "Run a bash command line in the same sandbox as " + t.opts.CodeToolName + " (same files under /session), " +
			"beside the Python session, which it neither sees nor disturbs. " +
			"Use it for shell work: listing and moving files, grep, running command-line tools. " +
			"The reply shows the exit code, stdout and stderr. It runs in /session unless cwd says otherwise. " +
			"At the timeout the command and every process it started are killed, and so is anything it leaves running when it exits: do not start servers or background jobs with it. " +
			"The sandbox may have no internet access.",
		Schema: []byte(`{"type":"object","properties":{` +
			`"command":{"type":"string","description":"bash command line"},` +
			`"cwd":{"type":"string","description":"absolute folder to run in (optional, default /session)"},` +
			`"timeout_s":{"type":"number","exclusiveMinimum":0,"description":"seconds before the command is killed (optional)"}},` +
			`"required":["command"],"additionalProperties":false}`),
		Call: func(ctx context.Context, input json.RawMessage) (string, error) { return t.shell(ctx, r, input) },
	}
}

func (t *toolset) shell(ctx context.Context, r ShellRunner, input json.RawMessage) (string, error) {
	var in shellInput
	if msg := decode(input, &in, shellExample); msg != "" {
		return msg, nil
	}
	if strings.TrimSpace(in.Command) == "" {
		return invalid(`"command" is required and must not be empty`, shellExample), nil
	}
	if in.Cwd != "" && !strings.HasPrefix(in.Cwd, "/") {
		return invalid(`"cwd" must be an absolute path such as /session/work`, shellExample), nil
	}
	cmd := session.Command{Line: in.Command, Cwd: in.Cwd}
	if in.TimeoutS != nil {
		max := t.opts.MaxTimeout.Seconds()
		if s := *in.TimeoutS; s <= 0 || math.IsNaN(s) || s > max {
			return invalid(fmt.Sprintf(`"timeout_s" must be more than 0 and at most %g`, max), shellExample), nil
		}
		cmd.Timeout = time.Duration(*in.TimeoutS * float64(time.Second))
	}
	key, err := t.key(ctx)
	if err != nil {
		return "", err
	}
	res, err := r.Run(ctx, key, cmd)
	var ce *session.CommandError
	switch {
	case errors.Is(err, session.ErrSessionLost):
		return "The sandbox was lost while running the command (its container stopped): files and Python state are gone. " +
			"The next call starts a fresh sandbox.", nil
	case errors.As(err, &ce):
		return "The command could not start: " + cut(ce.Error(), 300) + ". Check the cwd (it must exist and be a folder you may enter).", nil
	case errors.Is(err, session.ErrInvalidCommand):
		var se *session.Error
		msg := err.Error()
		if errors.As(err, &se) {
			msg = se.Err.Error()
		}
		return invalid(cut(strings.TrimPrefix(msg, session.ErrInvalidCommand.Error()+": "), 300), shellExample), nil
	case err != nil:
		return "", fmt.Errorf("run shell command: %w", err)
	}
	return t.formatCommand(res), nil
}

// formatCommand renders a command's result for a model, each stream cut
// to MaxReplyBytes and binary output described, not dumped.
func (t *toolset) formatCommand(r *session.CommandResult) string {
	max := t.opts.MaxReplyBytes
	var b strings.Builder
	fmt.Fprintf(&b, "exit code: %d", r.ExitCode)
	if r.Signal != "" {
		fmt.Fprintf(&b, " (killed by %s)", r.Signal)
	}
	b.WriteByte('\n')
	part := func(title, text string, truncated int64) {
		if text == "" {
			return
		}
		if desc := binaryDescription(text, truncated); desc != "" {
			fmt.Fprintf(&b, "%s: %s\n", title, desc)
			return
		}
		fmt.Fprintf(&b, "%s:\n%s", title, cut(text, max))
		if !strings.HasSuffix(text, "\n") {
			b.WriteByte('\n')
		}
	}
	part("stdout", r.Stdout, r.Truncated["stdout"])
	part("stderr", r.Stderr, r.Truncated["stderr"])
	var notes strings.Builder
	note := func(format string, args ...any) { fmt.Fprintf(&notes, "- "+format+"\n", args...) }
	if r.TimedOut {
		note("the command timed out and was killed, with every process it started (it ran %s in all); output is partial", r.Duration.Round(time.Second))
	} else if r.Interrupted {
		note("the command was interrupted and killed; output is partial")
	}
	for _, stream := range slices.Sorted(maps.Keys(r.Truncated)) {
		note("the sandbox cut %d bytes from the middle of %s: print less, or write it to a file and look at parts of it", r.Truncated[stream], stream)
	}
	if r.Stdout == "" && r.Stderr == "" && !r.TimedOut {
		note("the command printed nothing")
	}
	if notes.Len() > 0 {
		fmt.Fprintf(&b, "notes:\n%s", notes.String())
	}
	return b.String()
}

// binaryDescription describes output that is not text (a NUL byte, or
// many bytes that are not printable UTF-8), "" for text.
func binaryDescription(s string, truncated int64) string {
	bad, n := 0, 0
	for _, r := range s {
		n++
		if r == 0 {
			bad = n // any NUL: binary
			break
		}
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' && r != 0x1b) {
			bad++
		}
	}
	if n == 0 || bad*10 < n {
		return ""
	}
	return fmt.Sprintf("[binary output, %s, not shown: write it to a file and inspect it with od -c | head, or from Python]", size(int64(len(s))+truncated))
}
