package tools_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/tools"
)

// TestMissingModuleHintOnTheEngine: the real kernel's ModuleNotFoundError
// reply names the Debian package to add.
func TestMissingModuleHintOnTheEngine(t *testing.T) {
	t.Parallel()
	tl := find(t, tools.New(engineManager(t), tools.Options{}), "code_sandbox")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reply, err := tl.Call(ctx, []byte(`{"code":"import tabulate"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := "module tabulate is not installed in the sandbox image; ask the operator to add the Debian package python3-tabulate (SANDBOX_EXTRA_PACKAGES)"
	if !strings.Contains(reply, "ModuleNotFoundError: No module named 'tabulate'") || !strings.Contains(reply, want) {
		t.Errorf("reply:\n%s\nwant the exception and %q", reply, want)
	}
}
