package opensandbox

import (
	"testing"

	"github.com/agentbox/agentbox/config"
)

func TestParseQuantities(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		mb   int
		fail bool
	}{
		{"512Mi", 512, false}, {"2Gi", 2048, false}, {"1G", 954, false}, {"1048576", 1, false},
		{"1000000", 1, false}, {"64Mi", 64, false}, {"0.5Gi", 512, false},
		{"0", 0, true}, {"-1Gi", 0, true}, {"Mi", 0, true}, {"1Qi", 0, true}, {"1e400", 0, true},
	} {
		mb, err := parseMemory(tt.in)
		if (err != nil) != tt.fail || (!tt.fail && mb != tt.mb) {
			t.Errorf("parseMemory(%q) = %d, %v; want %d, fail %v", tt.in, mb, err, tt.mb, tt.fail)
		}
	}
	for _, tt := range []struct {
		in   string
		cpus float64
		fail bool
	}{
		{"500m", 0.5, false}, {"1", 1, false}, {"0.25", 0.25, false}, {"2000m", 2, false},
		{"0", 0, true}, {"0m", 0, true}, {"-1", 0, true}, {"1.5m", 0, true}, {"one", 0, true}, {"NaN", 0, true},
	} {
		c, err := parseCPU(tt.in)
		if (err != nil) != tt.fail || (!tt.fail && c != tt.cpus) {
			t.Errorf("parseCPU(%q) = %g, %v; want %g, fail %v", tt.in, c, err, tt.cpus, tt.fail)
		}
	}
}

func TestImageName(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.SandboxImages = map[string]string{"data": "agentbox-sandbox:data"}
	for in, want := range map[string]string{
		"default":                 "default",
		"data":                    "data",
		"agentbox-sandbox:data":   "data",
		"agentbox-sandbox:latest": "default",
		"python:3.11":             "default",
		"ubuntu":                  "default",
	} {
		if got := imageName(in, cfg); got != want {
			t.Errorf("imageName(%q) = %q, want %q", in, got, want)
		}
	}
}
