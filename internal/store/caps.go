package store

import (
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/agentbox/agentbox/kernel"
)

// capText returns s if it is at most max bytes long, else its head and tail,
// about max/2 bytes each and cut on rune boundaries, joined by a marker line
// that says how many bytes were cut.
func capText(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	head := max / 2
	for i := 0; i < utf8.UTFMax && head > 0 && !utf8.RuneStart(s[head]); i++ {
		head--
	}
	tail := len(s) - (max - max/2)
	for i := 0; i < utf8.UTFMax && tail < len(s) && !utf8.RuneStart(s[tail]); i++ {
		tail++
	}
	return s[:head] + fmt.Sprintf("\n[... %d bytes cut ...]\n", tail-head) + s[tail:]
}

// capOutputs returns outputs with every image larger than max bytes (its
// base64 text) replaced by a note; outputs itself is not changed.
func capOutputs(outputs []kernel.Output, max int) []kernel.Output {
	if len(outputs) == 0 {
		return []kernel.Output{} // stored as [] rather than null
	}
	out := make([]kernel.Output, len(outputs))
	for i, o := range outputs {
		out[i] = o
		copied := false
		for mime, v := range o.Data {
			if max <= 0 || len(v) <= max || !strings.HasPrefix(mime, "image/") {
				continue
			}
			if !copied { // the caller's map stays whole
				out[i].Data = maps.Clone(o.Data)
				copied = true
			}
			out[i].Data[mime] = fmt.Sprintf("[%s: %d bytes, not kept in history]", mime, len(v))
		}
	}
	return out
}
