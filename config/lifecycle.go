package config

import (
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultImageName is the name under which a session asks for SandboxImage.
const DefaultImageName = "default"

const (
	imageNamePattern = `^[a-z0-9][a-z0-9_.-]{0,63}$`
	wantImages       = "comma-separated name=reference pairs, names matching " + imageNamePattern + " (not " + DefaultImageName + ", which is SANDBOX_IMAGE), such as data=agentbox-sandbox:data"
)

var imageNameRE = regexp.MustCompile(imageNamePattern)

// DefaultMaxMemoryMB is the most memory, in MiB, a session may ask for
// when SANDBOX_MAX_MEMORY_MB is not set (and SANDBOX_MEMORY_MB is less):
// OpenSandbox's SDK asks every sandbox for "2Gi" unless its program says
// otherwise, and the programs written for it should run unchanged.
const DefaultMaxMemoryMB = 2048

// SessionMaxMemoryMB is the most memory a session may ask for, in MiB:
// MaxMemoryMB, or when that is 0 the larger of MemoryMB and
// DefaultMaxMemoryMB. Without an explicit maximum the Manager gives a
// request less (never less than MemoryMB) when the engine's host cannot
// back it; see MaxMemoryExplicit.
func (c Config) SessionMaxMemoryMB() int {
	if c.MaxMemoryMB > 0 {
		return c.MaxMemoryMB
	}
	return max(c.MemoryMB, DefaultMaxMemoryMB)
}

// MaxMemoryExplicit reports whether the operator set a maximum
// (SANDBOX_MAX_MEMORY_MB > 0): a request above it is refused, and one
// within it is given in full, whatever the host has.
func (c Config) MaxMemoryExplicit() bool { return c.MaxMemoryMB > 0 }

// SessionMaxCPUs is the most CPUs a session may ask for: MaxCPUs, or CPUs
// when that is 0.
func (c Config) SessionMaxCPUs() float64 {
	if c.MaxCPUs > 0 {
		return c.MaxCPUs
	}
	return c.CPUs
}

// ImageRef returns the reference of the sandbox image a session asks for by
// name ("" or DefaultImageName: SandboxImage), and whether it is allowed.
func (c Config) ImageRef(name string) (string, bool) {
	if name == "" || name == DefaultImageName {
		return c.SandboxImage, true
	}
	ref, ok := c.SandboxImages[name]
	return ref, ok
}

// ImageNames returns the names sessions may ask for, DefaultImageName
// first, the rest sorted.
func (c Config) ImageNames() []string {
	return append([]string{DefaultImageName}, slices.Sorted(maps.Keys(c.SandboxImages))...)
}

// lifecycleSpecs are the variables of session lifetimes and per-session
// options, last in example.env.
func lifecycleSpecs() []spec {
	ttl := durationSpec("SESSION_TTL_S", "time to live of a new session that asks for none, in seconds (the sweep removes it then, used or not; Renew extends it); 0 means none",
		0, 0, maxSeconds, " (0 means none)", func(c *Config) *time.Duration { return &c.SessionTTL })
	ttlRange := ttl.check
	ttl.check = func(c Config) string {
		if w := ttlRange(c); w != "" {
			return w
		}
		if c.MaxSessionTTL > 0 && (c.SessionTTL == 0 || c.SessionTTL > c.MaxSessionTTL) {
			return "from 1 to SESSION_MAX_TTL_S (" + strconv.FormatFloat(c.MaxSessionTTL.Seconds(), 'f', -1, 64) + "): with a maximum set, every session needs a time to live within it"
		}
		return ""
	}
	maxMem := intSpec("SANDBOX_MAX_MEMORY_MB", "most memory a session may ask for, in MiB; 0 means the larger of SANDBOX_MEMORY_MB and 2048 (OpenSandbox's SDK asks 2Gi), lowered to what the engine's host can back", 0, 0, math.MaxInt,
		func(c *Config) *int { return &c.MaxMemoryMB })
	memRange := maxMem.check
	maxMem.check = func(c Config) string {
		if w := memRange(c); w != "" {
			return w
		}
		if c.MaxMemoryMB != 0 && c.MaxMemoryMB < c.MemoryMB {
			return "0 or at least SANDBOX_MEMORY_MB (" + strconv.Itoa(c.MemoryMB) + ")"
		}
		return ""
	}
	const wantMaxCPUs = "0, or a number ≥ SANDBOX_CPUS and ≤ 64"
	return []spec{
		ttl,
		durationSpec("SESSION_MAX_TTL_S", "longest time to live a session may ask for, at creation or renewal, in seconds; 0 means no maximum",
			0, 0, maxSeconds, " (0 means no maximum)", func(c *Config) *time.Duration { return &c.MaxSessionTTL }),
		maxMem,
		{
			name: "SANDBOX_MAX_CPUS", def: "0", want: wantMaxCPUs,
			help: "most CPUs a session may ask for; 0 means SANDBOX_CPUS",
			set: func(c *Config, v string) bool {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || !(f == 0 || cpusOK(f)) {
					return false
				}
				c.MaxCPUs = f
				return true
			},
			get: func(c Config) string { return strconv.FormatFloat(c.MaxCPUs, 'f', -1, 64) },
			check: func(c Config) string {
				if c.MaxCPUs != 0 && (!cpusOK(c.MaxCPUs) || c.MaxCPUs < c.CPUs) {
					return wantMaxCPUs
				}
				return ""
			},
		},
		{
			name: "SANDBOX_IMAGES", def: "", want: wantImages,
			help: "sandbox images sessions may ask for by name besides SANDBOX_IMAGE (named default): comma-separated name=reference pairs",
			set: func(c *Config, v string) bool {
				m := map[string]string{}
				for _, item := range splitList(v) {
					name, ref, ok := strings.Cut(item, "=")
					name, ref = strings.TrimSpace(name), strings.TrimSpace(ref)
					if _, dup := m[name]; !ok || dup {
						return false
					}
					m[name] = ref
				}
				c.SandboxImages = m
				return true
			},
			get: func(c Config) string {
				var items []string
				for _, n := range slices.Sorted(maps.Keys(c.SandboxImages)) {
					items = append(items, n+"="+c.SandboxImages[n])
				}
				return strings.Join(items, ",")
			},
			check: func(c Config) string {
				for _, n := range slices.Sorted(maps.Keys(c.SandboxImages)) {
					ref := c.SandboxImages[n]
					switch {
					case n == DefaultImageName || !imageNameRE.MatchString(n):
						return wantImages + " (the name " + strconv.Quote(n) + " is not)"
					case !imageRE.MatchString(ref):
						return wantImages + " (" + strconv.Quote(ref) + ", the reference of " + n + ", is not an image reference)"
					}
				}
				return ""
			},
		},
	}
}
