package readme_test

import (
	"slices"
	"strings"
	"testing"
)

// TestRecipeCommandRunsOnlyTheRecipe: TestGoModuleRecipe runs the README's
// go mod lines as they are written, as root in CI. Only the recipe's two
// steps may run (go mod edit requiring and replacing this module by the
// clone, go mod tidy); a README line that vendors into a folder of its
// choosing (go mod vendor -o), downloads modules or a toolchain, switches
// the toolchain or points the module elsewhere is refused. Before, every
// "go mod ..." line ran.
func TestRecipeCommandRunsOnlyTheRecipe(t *testing.T) {
	const root = "/src/agentbox"
	for line, want := range map[string][]string{
		"go mod tidy": {"mod", "tidy"},
		"go mod edit -require=github.com/agentbox/agentbox@v0.0.0 -replace=github.com/agentbox/agentbox=../agentbox": {
			"mod", "edit", "-require=github.com/agentbox/agentbox@v0.0.0", "-replace=github.com/agentbox/agentbox=" + root,
		},
	} {
		got, err := recipeCommand(line, root)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: got %q, %v; want %q", line, got, err, want)
		}
	}
	for _, line := range []string{
		"go mod vendor -o /etc/agentbox-vendor",
		"go mod download golang.org/toolchain@v0.0.1-go1.99.0.linux-amd64",
		"go mod edit -toolchain=go1.99.0",
		"go mod edit -go=1.99",
		"go mod edit -replace=github.com/agentbox/agentbox=/",
		"go mod edit -replace=example.com/other=../agentbox",
		"go mod edit -require=example.com/other@v1.0.0",
		"go mod tidy -go=1.99",
		"go mod",
		"go mod init example.com/other",
	} {
		if got, err := recipeCommand(line, root); err == nil {
			t.Errorf("%s: ran as go %s; want it refused", line, strings.Join(got, " "))
		}
	}
}

// TestRecipeEnvKeepsTheToolchain: the recipe's go commands never fetch and
// run another toolchain (a go or toolchain line of the module asking for
// one, GOTOOLCHAIN=auto in the environment), which GOSUMDB=off would leave
// unchecked. Before, GOTOOLCHAIN came from the environment.
func TestRecipeEnvKeepsTheToolchain(t *testing.T) {
	env := recipeEnv([]string{"GOTOOLCHAIN=auto", "GOFLAGS=-x"})
	last := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v // exec's rule: the last of a name wins
	}
	for k, want := range map[string]string{"GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"} {
		if last[k] != want {
			t.Errorf("%s=%q in the recipe's environment; want %q", k, last[k], want)
		}
	}
}
