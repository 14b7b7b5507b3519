package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/session"
)

func (t *toolset) listArtifacts(l ArtifactLister) Tool {
	return Tool{
		Name: "list_artifacts",
		Description: "List the files saved for the user in this conversation (under /session/artifacts, figures and exports), " +
			"newest first, each in its latest version, with their download URLs.",
		Schema: []byte(emptyObjectType),
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
				return "No artifacts yet. Save files under /session/artifacts/ from " + t.opts.CodeToolName + ".", nil
			}
			// Newest first: the first row of a name is its latest version.
			seen := make(map[string]bool, len(arts))
			latest := make([]session.Artifact, 0, len(arts))
			for _, a := range arts {
				if !seen[a.Name] {
					seen[a.Name] = true
					latest = append(latest, a)
				}
			}
			return listArtifacts(latest, t.opts.MaxReplyBytes, len(arts)-len(latest)), nil
		},
	}
}

// footerRoom is what listArtifacts keeps free for the lines that say what
// it left out.
const footerRoom = 200

// listArtifacts lists arts one line each, whole lines only, as many as fit
// in about max bytes, then says how many it left out and how many older
// versions (superseded) it did not list. A line is never cut: its URL
// would be a broken link.
func listArtifacts(arts []session.Artifact, max, superseded int) string {
	var b strings.Builder
	room := max - footerRoom
	shown := 0
	for _, a := range arts {
		line := fmt.Sprintf("- %s (%s, %s): %s\n", name(a.Name), a.MIME, size(a.Size), a.URL)
		if b.Len()+len(line) > room {
			break
		}
		b.WriteString(line)
		shown++
	}
	if left := len(arts) - shown; left > 0 {
		fmt.Fprintf(&b, "[%d more %s not listed, to keep this reply short]\n", left, plural(left, "file", "files"))
	}
	if superseded > 0 {
		fmt.Fprintf(&b, "[%d older %s of these files not listed: each file is listed once, in its latest version]\n",
			superseded, plural(superseded, "version", "versions"))
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
