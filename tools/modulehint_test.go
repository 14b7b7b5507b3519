package tools

import (
	"testing"

	"github.com/agentbox/agentbox/kernel"
)

func TestMissingModuleHint(t *testing.T) {
	for _, tt := range []struct {
		e    *kernel.Exception
		want string
	}{
		{&kernel.Exception{Name: "ModuleNotFoundError", Value: "No module named 'tabulate'"},
			"\nmodule tabulate is not installed in the sandbox image; ask the operator to add the Debian package python3-tabulate (SANDBOX_EXTRA_PACKAGES)"},
		{&kernel.Exception{Name: "ModuleNotFoundError", Value: "No module named 'statsmodels.api'"},
			"\nmodule statsmodels is not installed in the sandbox image; ask the operator to add the Debian package python3-statsmodels (SANDBOX_EXTRA_PACKAGES)"},
		{&kernel.Exception{Name: "ModuleNotFoundError", Value: "No module named 'Typing_Extensions'"},
			"\nmodule Typing_Extensions is not installed in the sandbox image; ask the operator to add the Debian package python3-typing-extensions (SANDBOX_EXTRA_PACKAGES)"},
		{&kernel.Exception{Name: "ModuleNotFoundError", Value: "something else"}, ""},
		{&kernel.Exception{Name: "ImportError", Value: "cannot import name 'x' from 'y'"}, ""},
		{&kernel.Exception{Name: "ZeroDivisionError", Value: "division by zero"}, ""},
		{nil, ""},
	} {
		if got := missingModuleHint(tt.e); got != tt.want {
			t.Errorf("missingModuleHint(%+v) = %q, want %q", tt.e, got, tt.want)
		}
	}
}

func TestReplyNamesTheDebianPackage(t *testing.T) {
	e := &kernel.Exception{Name: "ModuleNotFoundError", Value: "No module named 'pip'",
		Traceback: []string{"Traceback (most recent call last):", `  File "<cell 1>", line 1, in <module>`, "ModuleNotFoundError: No module named 'pip'"}}
	got := exceptionText(e) + missingModuleHint(e)
	want := "Traceback (most recent call last):\n  File \"<cell 1>\", line 1, in <module>\nModuleNotFoundError: No module named 'pip'\n" +
		"module pip is not installed in the sandbox image; ask the operator to add the Debian package python3-pip (SANDBOX_EXTRA_PACKAGES)"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
