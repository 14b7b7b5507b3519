package config

import "math"

// Defaults of the tenant quotas: more than one person's agents use at once
// (a conversation each, a few running at a time), less than what fills a
// host of this size (about 18 sandboxes of the default 1 GiB, or hundreds
// of queued executions).
const (
	DefaultTenantMaxSandboxes  = 16
	DefaultTenantMaxMemoryMB   = 16384
	DefaultTenantMaxInflight   = 32
	DefaultTenantMaxArtifactMB = 10240
)

// quotaSpecs are the variables of the tenant quotas, last in example.env.
func quotaSpecs() []spec {
	return []spec{
		intSpec("TENANT_MAX_SANDBOXES", "most sessions one tenant may have at once; 0 means no limit",
			DefaultTenantMaxSandboxes, 0, math.MaxInt, func(c *Config) *int { return &c.TenantMaxSandboxes }),
		intSpec("TENANT_MAX_MEMORY_MB", "most memory one tenant's sessions may have as limits, summed, in MiB; 0 means no limit",
			DefaultTenantMaxMemoryMB, 0, math.MaxInt, func(c *Config) *int { return &c.TenantMaxMemoryMB }),
		intSpec("TENANT_MAX_INFLIGHT", "most executions and shell commands one tenant may have running or queued at once; 0 means no limit",
			DefaultTenantMaxInflight, 0, math.MaxInt, func(c *Config) *int { return &c.TenantMaxInflight }),
		intSpec("TENANT_MAX_ARTIFACT_MB", "most artifact bytes stored for one tenant's sessions, in MiB; 0 means no limit",
			DefaultTenantMaxArtifactMB, 0, math.MaxInt, func(c *Config) *int { return &c.TenantMaxArtifactMB }),
	}
}
