package session

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/kernel"
)

// TestLogOutputs keeps results in session.log, an image too large for a
// log line replaced by the note the history database uses.
func TestLogOutputs(t *testing.T) {
	big := strings.Repeat("A", maxLogImage+4)
	in := []kernel.Output{
		{Kind: "execute_result", Data: map[string]string{"text/plain": "42"}},
		{Kind: "display_data", Data: map[string]string{"image/png": big, "text/plain": "<Figure>"}},
		{Kind: "display_data", Data: map[string]string{"image/png": "iVBORw0KGgo="}},
	}
	out := logOutputs(in)
	if len(out) != 3 || out[0].Data["text/plain"] != "42" || out[2].Data["image/png"] != "iVBORw0KGgo=" {
		t.Errorf("logOutputs changed what fits: %+v", out)
	}
	if want := "[image/png: 65540 bytes, not kept in history]"; out[1].Data["image/png"] != want || out[1].Data["text/plain"] != "<Figure>" {
		t.Errorf("large image: %q, want %q", out[1].Data["image/png"], want)
	}
	if in[1].Data["image/png"] != big {
		t.Error("logOutputs changed the caller's result")
	}
}
