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
		Name: "code_sandbox",
		Description: "Run Python code in a persistent sandbox (like a Jupyter notebook). " +
			"Variables, imports and files persist between calls in this conversation. " +
			"The reply shows stdout, stderr, the value of the last expression and any exception. " +
			"Print what you need to see and keep output short. " +
			"Datasets are read-only under /data, or under /session/data once selected with select_dataset; call list_datasets to see them. " +
			"Save files for the user under " + session.ArtifactsDir + "/ (figures are saved automatically); the reply lists their download URLs. " +
			"The sandbox may have no internet access.",
		Schema: []byte(`{"type":"object","properties":{` +
			`"code":{"type":"string","description":"Python code to run"},` +
			`"timeout_s":{"type":"number","exclusiveMinimum":0,"description":"seconds before the code is interrupted (optional)"}},` +
			`"required":["code"],"additionalProperties":false}`),
		Call: t.runCode,
	}
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
	if e := r.Error; e != nil {
		tb := e.Traceback
		if len(tb) > tracebackLines {
			tb = tb[len(tb)-tracebackLines:]
		}
		text := e.Name + ": " + e.Value
		if len(tb) > 0 {
			text = strings.Join(tb, "\n") + "\n" + text
		}
		part("error", text)
	}
	if len(r.Artifacts) > 0 {
		var a strings.Builder
		for _, art := range r.Artifacts {
			fmt.Fprintf(&a, "- %s (%s, %s): %s\n", name(art.Name), art.MIME, size(art.Size), art.URL)
		}
		part("artifacts", a.String())
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
