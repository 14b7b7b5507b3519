package mcpserver

import (
	"encoding/base64"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/session"
)

// imageTypes are the image types a reply carries, in order of preference
// when one output offers several (the same figure in two formats). SVG is
// left out: it is text, and active content.
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// images returns the figures and images r's outputs hold as MCP image
// content, one per output, at most budget bytes in all; a note says what
// was left out.
func images(r *session.Result, budget int) []mcp.Content {
	var out []mcp.Content
	over, bad := 0, 0
	for _, o := range r.Outputs {
		for _, mime := range imageTypes {
			b64, ok := o.Data[mime]
			if !ok {
				continue
			}
			data, err := base64.StdEncoding.DecodeString(b64)
			switch {
			case err != nil:
				bad++ // the sandbox's word: it can send anything
			case len(data) > budget:
				over++
			default:
				budget -= len(data)
				out = append(out, &mcp.ImageContent{Data: data, MIMEType: mime})
			}
			break
		}
	}
	if over > 0 {
		out = append(out, &mcp.TextContent{Text: fmt.Sprintf(
			"[%d %s not shown: too large for one reply; figures are saved as artifacts, see their URLs]", over, plural(over, "image", "images"))})
	}
	if bad > 0 {
		out = append(out, &mcp.TextContent{Text: fmt.Sprintf("[%d %s not shown: not valid base64 data]", bad, plural(bad, "image", "images"))})
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
