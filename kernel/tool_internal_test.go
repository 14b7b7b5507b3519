package kernel

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestToolConstantsMatchInit checks the credit and the chunk against the
// init's (sandbox-image/agentbox_tools.py, WINDOW and CHUNK): a host whose
// window is larger than the init's has its input refused ("input beyond the
// tool's window"), and one whose chunk is larger has its "in" frames refused.
func TestToolConstantsMatchInit(t *testing.T) {
	src, err := os.ReadFile("../sandbox-image/agentbox_tools.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want int
	}{{"WINDOW", ToolWindow}, {"CHUNK", toolChunk}} {
		// "NAME = 4 << 20" or "NAME = 262144", then a comment or nothing.
		m := regexp.MustCompile(`(?m)^` + c.name + ` = (\d+)(?: << (\d+))?\s*(?:#.*)?$`).FindSubmatch(src)
		if m == nil {
			t.Errorf("agentbox_tools.py declares no %s of the form N or N << M", c.name)
			continue
		}
		v, _ := strconv.Atoi(string(m[1]))
		if len(m[2]) > 0 {
			shift, _ := strconv.Atoi(string(m[2]))
			v <<= shift
		}
		if v != c.want {
			t.Errorf("agentbox_tools.py has %s = %d, the kernel package %d", c.name, v, c.want)
		}
	}
}
