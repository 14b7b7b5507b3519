package config_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
)

func TestLifecycleSettings(t *testing.T) {
	c, err := config.FromLookup(env(map[string]string{
		"SESSION_TTL_S":         "600",
		"SESSION_MAX_TTL_S":     "3600",
		"SANDBOX_MAX_MEMORY_MB": "4096",
		"SANDBOX_MAX_CPUS":      "2.5",
		"SANDBOX_IMAGES":        " data = agentbox-sandbox:data , gpu=registry.local:5000/sb/gpu:1 ",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.SessionTTL != 10*time.Minute || c.MaxSessionTTL != time.Hour || c.MaxMemoryMB != 4096 || c.MaxCPUs != 2.5 {
		t.Errorf("got TTL %s, max %s, memory %d, CPUs %g", c.SessionTTL, c.MaxSessionTTL, c.MaxMemoryMB, c.MaxCPUs)
	}
	if ref, ok := c.ImageRef("gpu"); !ok || ref != "registry.local:5000/sb/gpu:1" {
		t.Errorf("ImageRef(gpu) = %q, %v", ref, ok)
	}
	if ref, ok := c.ImageRef("default"); !ok || ref != c.SandboxImage {
		t.Errorf("ImageRef(default) = %q, %v; want SANDBOX_IMAGE", ref, ok)
	}
	if _, ok := c.ImageRef("other"); ok {
		t.Error("ImageRef(other) allowed an image not in SANDBOX_IMAGES")
	}
	if got := c.ImageNames(); !slices.Equal(got, []string{"default", "data", "gpu"}) {
		t.Errorf("ImageNames = %v", got)
	}
	if !strings.Contains(c.String(), "SANDBOX_IMAGES=data=agentbox-sandbox:data,gpu=registry.local:5000/sb/gpu:1\n") {
		t.Errorf("String does not list the images as they load:\n%s", c.String())
	}
	d := config.Default()
	// With no maxima: memory up to what OpenSandbox's SDK asks by default
	// (TestDefaultMaxMemoryAdmitsSDKDefault), CPUs the default.
	if d.SessionMaxMemoryMB() != config.DefaultMaxMemoryMB || d.SessionMaxCPUs() != d.CPUs {
		t.Errorf("with no maxima: got %d MiB, %g CPUs; want %d MiB, %g", d.SessionMaxMemoryMB(), d.SessionMaxCPUs(), config.DefaultMaxMemoryMB, d.CPUs)
	}
}

func TestLifecycleSettingsRefused(t *testing.T) {
	for _, tt := range []struct {
		vars map[string]string
		name string // the variable the error must name
	}{
		{map[string]string{"SESSION_TTL_S": "-1"}, "SESSION_TTL_S"},
		{map[string]string{"SESSION_TTL_S": "1h"}, "SESSION_TTL_S"},
		{map[string]string{"SESSION_MAX_TTL_S": "60", "SESSION_TTL_S": "120"}, "SESSION_TTL_S"},
		{map[string]string{"SESSION_MAX_TTL_S": "60"}, "SESSION_TTL_S"}, // none is longer than any maximum
		{map[string]string{"SANDBOX_MAX_MEMORY_MB": "512"}, "SANDBOX_MAX_MEMORY_MB"},
		{map[string]string{"SANDBOX_MAX_CPUS": "0.5"}, "SANDBOX_MAX_CPUS"},
		{map[string]string{"SANDBOX_MAX_CPUS": "65"}, "SANDBOX_MAX_CPUS"},
		{map[string]string{"SANDBOX_MAX_CPUS": "NaN"}, "SANDBOX_MAX_CPUS"},
		{map[string]string{"SANDBOX_IMAGES": "data"}, "SANDBOX_IMAGES"},
		{map[string]string{"SANDBOX_IMAGES": "default=x:1"}, "SANDBOX_IMAGES"},
		{map[string]string{"SANDBOX_IMAGES": "Data=x:1"}, "SANDBOX_IMAGES"},
		{map[string]string{"SANDBOX_IMAGES": "a=x:1,a=y:2"}, "SANDBOX_IMAGES"},
		{map[string]string{"SANDBOX_IMAGES": "a=Not An Image"}, "SANDBOX_IMAGES"},
	} {
		_, err := config.FromLookup(env(tt.vars))
		var ve *config.VarError
		if !errors.As(err, &ve) || ve.Name != tt.name || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%v: got %v, want a *VarError naming %s", tt.vars, err, tt.name)
		}
	}
}
