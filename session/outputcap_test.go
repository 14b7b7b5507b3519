package session_test

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
)

// TestMaxOutputBytesReachesTheSandbox: a Manager's MAX_OUTPUT_BYTES is the
// cap its sessions apply to each stream (the init's own default is 1 MiB),
// head and tail kept and the cut counted.
func TestMaxOutputBytesReachesTheSandbox(t *testing.T) {
	t.Parallel()
	const limit = 4096
	m := newManager(t, func(c *config.Config) { c.MaxOutputBytes = limit })
	res := mustExec(t, m, "k", "import sys\nprint('<' + 'x' * 100_000 + '>')\nsys.stderr.write('[' + 'y' * 50_000 + ']')")
	for _, s := range []struct {
		name, text, head, tail string
		written                int
	}{
		{"stdout", res.Stdout, "<x", "x>\n", 100_003},
		{"stderr", res.Stderr, "[y", "y]", 50_002},
	} {
		if len(s.text) < limit/2 || len(s.text) > limit+200 {
			t.Errorf("%s: %d bytes, want about %d (MAX_OUTPUT_BYTES)", s.name, len(s.text), limit)
		}
		if !strings.HasPrefix(s.text, s.head) || !strings.HasSuffix(s.text, s.tail) || !strings.Contains(s.text, "bytes of "+s.name+" cut here") {
			t.Errorf("%s: head, tail or cut marker missing: %.60q ... %.60q", s.name, s.text, s.text[max(0, len(s.text)-60):])
		}
		if cut := res.Truncated[s.name]; cut < int64(s.written-limit-200) || cut > int64(s.written-limit/2) {
			t.Errorf("%s: Truncated %d of %d bytes written, cap %d", s.name, cut, s.written, limit)
		}
	}
}
