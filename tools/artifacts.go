package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

func (t *toolset) listArtifacts(l ArtifactLister) Tool {
	return Tool{
		Name:        "list_artifacts",
		Description: "List the files saved for the user in this conversation (under /session/artifacts, figures and exports) with their download URLs.",
		Schema:      []byte(emptyObjectType),
		Call: func(ctx context.Context, input json.RawMessage) (string, error) {
			var in struct{}
			if msg := decode(input, &in, noInputExample); msg != "" {
				return msg, nil
			}
			key, err := t.key(ctx)
			if err != nil {
				return "", err
			}
			arts, err := l.Artifacts(ctx, key)
			if err != nil {
				return "", fmt.Errorf("list artifacts: %w", err)
			}
			if len(arts) == 0 {
				return "No artifacts yet. Save files under /session/artifacts/ from code_sandbox.", nil
			}
			var b strings.Builder
			for _, a := range arts {
				fmt.Fprintf(&b, "- %s (%s, %s): %s\n", name(a.Name), a.MIME, size(a.Size), a.URL)
			}
			return cut(b.String(), t.opts.MaxReplyBytes), nil
		},
	}
}
