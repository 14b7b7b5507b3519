package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// tracebackLines is how many of the last traceback lines a reply shows.
const tracebackLines = 6

const codeExample = `{"code": "import math\nprint(math.pi)", "timeout_s": 60}`

type codeInput struct {
	Code     string   `json:"code"`
	TimeoutS *float64 `json:"timeout_s"`
}

func (t *toolset) codeSandbox() Tool {
	return Tool{
		Name: t.opts.CodeToolName,
		Description: "Run Python code in a persistent sandbox (like a Jupyter notebook). " +
			"Variables, imports and files persist between calls in this conversation. " +
			"The reply shows stdout, stderr, the value of the last expression and any exception. " +
			"Print what you need to see and keep output short. " +
			t.datasetsHint() +
			"Save files for the user under " + session.ArtifactsDir + "/ (figures are saved automatically); the reply lists their download URLs. " +
			"The sandbox may have no internet access and cannot pip install: if an import fails, the module is not installed in the sandbox image; " +
			"tell the user to ask the operator to add the Debian package (python3-<name>) with SANDBOX_EXTRA_PACKAGES, and carry on without it.",
		Schema: []byte(`{"type":"object","properties":{` +
			`"code":{"type":"string","description":"Python code to run"},` +
			`"timeout_s":{"type":"number","exclusiveMinimum":0,"description":"seconds before the code is interrupted (optional)"}},` +
			`"required":["code"],"additionalProperties":false}`),
		Call: t.runCode,
	}
}

// datasetsHint tells the model where datasets are, naming select_dataset
// only when it is offered.
func (t *toolset) datasetsHint() string {
	if !t.canSelect {
		return "Datasets, if any, are read-only under /data; call list_datasets to see them. "
	}
	return "Datasets are read-only under /data, or under " + session.DatasetsDir + " once selected with select_dataset; call list_datasets to see them. "
}

func (t *toolset) runCode(ctx context.Context, input json.RawMessage) (string, error) {
	var in codeInput
	if msg := decode(input, &in, codeExample); msg != "" {
		return msg, nil
	}
	if strings.TrimSpace(in.Code) == "" {
		return invalid(`"code" is required and must not be empty`, codeExample), nil
	}
	var opts []session.ExecOption
	if in.TimeoutS != nil {
		max := t.opts.MaxTimeout.Seconds()
		if s := *in.TimeoutS; s <= 0 || math.IsNaN(s) || s > max {
			return invalid(fmt.Sprintf(`"timeout_s" must be more than 0 and at most %g`, max), codeExample), nil
		}
		opts = append(opts, session.Timeout(time.Duration(*in.TimeoutS*float64(time.Second))))
	}
	if id := callID(ctx); id != "" {
		opts = append(opts, session.ExecID(id))
	}
	key, err := t.key(ctx)
	if err != nil {
		return "", err
	}
	res, err := t.m.Exec(ctx, key, in.Code, opts...)
	if errors.Is(err, session.ErrSessionLost) {
		return "The sandbox was lost while running the code (its container stopped): variables, imports and files are gone. " +
			"The next call starts a fresh sandbox.", nil
	}
	if err != nil {
		return "", fmt.Errorf("run code: %w", err)
	}
	return t.formatResult(res), nil
}

// formatResult renders a result for a model, each part cut to
// MaxReplyBytes.
func (t *toolset) formatResult(r *session.Result) string {
	max := t.opts.MaxReplyBytes
	var b strings.Builder
	part := func(title, text string) {
		if text == "" {
			return
		}
		fmt.Fprintf(&b, "%s:\n%s", title, cut(text, max))
		if !strings.HasSuffix(text, "\n") {
			b.WriteByte('\n')
		}
	}
	part("stdout", r.Stdout)
	part("stderr", r.Stderr)
	for i := len(r.Outputs) - 1; i >= 0; i-- {
		if o := r.Outputs[i]; o.Kind == "execute_result" {
			part("result", o.Data["text/plain"])
			break
		}
	}
	if r.Error != nil {
		part("error", exceptionText(r.Error)+missingModuleHint(r.Error))
	}
	if len(r.Artifacts) > 0 {
		// Listed whole or not at all: a URL cut in the middle is a broken
		// link the model would hand on.
		fmt.Fprintf(&b, "artifacts:\n%s", listArtifacts(r.Artifacts, max, 0))
	}
	var notes strings.Builder
	note := func(format string, args ...any) { fmt.Fprintf(&notes, "- "+format+"\n", args...) }
	if r.TimedOut {
		note("the code timed out and was interrupted (KeyboardInterrupt); output is partial")
	} else if r.Interrupted {
		note("the code was interrupted; output is partial")
	}
	if r.StateLost {
		reason := ""
		if r.RestartReason != "" {
			reason = " (" + r.RestartReason + ")"
		}
		note("the kernel restarted%s: variables and imports from earlier calls are gone; re-run the setup code", reason)
	}
	for _, stream := range slices.Sorted(maps.Keys(r.Truncated)) {
		note("the sandbox cut %d bytes from the middle of %s", r.Truncated[stream], stream)
	}
	for _, s := range r.SkippedArtifacts {
		note("file %s was not saved as an artifact: %s", name(s.Name), s.Reason)
	}
	if r.Replayed {
		note("this call ran before: the recorded result is shown and the code did not run again")
	}
	part("notes", notes.String())
	if b.Len() == 0 {
		return "The code ran and produced no output. Print values or end with an expression to see them."
	}
	return b.String()
}

// exceptionText is the error part of a reply, as Python prints it: the
// last tracebackLines lines of the traceback's frames (from the first
// frame that starts among them), then the exception
// line ("ZeroDivisionError: division by zero", or "KeyboardInterrupt" when
// it has no value) and whatever follows it (the rest of a multi-line value,
// notes). The traceback already ends with the exception line; it is not
// added again. Without a traceback (a timeout, a restarted kernel) the
// exception line stands alone.
func exceptionText(e *kernel.Exception) string {
	line := e.Name
	if e.Value != "" {
		line += ": " + e.Value
	}
	tb := e.Traceback
	if len(tb) == 0 {
		return line
	}
	at := exceptionLine(tb, e.Name)
	if at < 0 {
		// No line names the exception (an exception group, say): the
		// tail of the traceback, then the exception.
		if len(tb) > tracebackLines {
			tb = tb[len(tb)-tracebackLines:]
		}
		return strings.Join(tb, "\n") + "\n" + line
	}
	frames := tb[:at]
	if len(frames) > tracebackLines {
		frames = frames[len(frames)-tracebackLines:]
		// Start at a frame, not inside one.
		for i, l := range frames {
			if strings.HasPrefix(l, "  File ") {
				frames = frames[i:]
				break
			}
		}
	}
	return strings.Join(append(slices.Clip(frames), tb[at:]...), "\n")
}

// exceptionLine is the index of the last line of tb that begins the
// exception name, as "Name", "Name: value" or, for an exception of a
// module, "pkg.mod.Name: value"; -1 if none. Frames and source lines are
// indented, so they never match.
func exceptionLine(tb []string, name string) int {
	for i := len(tb) - 1; i >= 0; i-- {
		head, _, _ := strings.Cut(tb[i], ":")
		if head == name || strings.HasSuffix(head, "."+name) && !strings.ContainsAny(head, " \t") {
			return i
		}
	}
	return -1
}

// missingModuleHint answers a ModuleNotFoundError ("No module named
// 'x.y'") with a line naming the Debian package that would bring module x;
// "" for any other exception. The sandbox has no network and no pip:
// packages come from Debian, added by the operator.
func missingModuleHint(e *kernel.Exception) string {
	if e == nil || e.Name != "ModuleNotFoundError" {
		return ""
	}
	name, ok := strings.CutPrefix(e.Value, "No module named ")
	if !ok {
		return ""
	}
	name = strings.Trim(name, "'\"")
	name, _, _ = strings.Cut(name, ".")
	if name == "" || strings.ContainsAny(name, " \t\n") {
		return ""
	}
	return "\nmodule " + name + " is not installed in the sandbox image; ask the operator to add the Debian package " +
		DebianPackage(name) + " (SANDBOX_EXTRA_PACKAGES)"
}

// DebianPackage is the Debian package that usually provides Python module
// name: python3- then the name in lower case, underscores as hyphens
// (sklearn: python3-sklearn, yaml: python3-yaml, dateutil: python3-dateutil).
func DebianPackage(module string) string {
	return "python3-" + strings.ReplaceAll(strings.ToLower(module), "_", "-")
}
