package session

import (
	"context"
)

// Memory a session asks for, against the memory of the engine's host.
//
// OpenSandbox's SDK asks every sandbox for 2 GiB unless told otherwise, so
// without SANDBOX_MAX_MEMORY_MB a session may ask for that much
// (config.DefaultMaxMemoryMB). On a small host such a limit would be no
// limit at all: the cgroup never fills before the host does, and then the
// host's OOM killer chooses among all its processes. So, when the operator
// set no maximum, a request is lowered to what the host can back (its
// memory less the session's files in memory at full size), never below
// SANDBOX_MEMORY_MB, and the lowering is logged; Info shows the limit
// given. An explicit maximum is the operator's word: requests within it
// are given in full, above it refused.

// learnHostMemory asks the driver, if it can tell, for the memory of the
// engine's host, and warns when the default session alone does not fit.
func (m *Manager) learnHostMemory(ctx context.Context) {
	em, ok := m.drv.(engineMemory)
	if !ok {
		return
	}
	b, err := em.EngineMemory(ctx)
	if err != nil || b <= 0 {
		// Unknown: requests are given as asked, as before.
		m.log.Debug("engine memory unknown; memory requests are not fitted to the host", "err", err)
		return
	}
	m.hostMB = int(b >> 20)
	if need := int(m.containerMemory(m.cfg.MemoryMB) >> 20); need > m.hostMB {
		m.log.Warn("a session's memory limit is more than the engine's host has: lower SANDBOX_MEMORY_MB or TMPFS_SIZE_MB",
			"container_limit_mb", need, "host_mb", m.hostMB,
			"memory_mb", m.cfg.MemoryMB, "files_mb", int(m.filesMemory()>>20))
	}
}

// fitMemory returns the memory, in MiB, a new session of key asking for
// askedMB (within the maximum) is given: askedMB, or less on a host that
// cannot back it when no maximum was set (see above).
func (m *Manager) fitMemory(key string, askedMB int) int {
	if m.hostMB == 0 || m.cfg.MaxMemoryExplicit() {
		return askedMB
	}
	fit := max(m.hostMB-int(m.filesMemory()>>20), m.cfg.MemoryMB)
	if askedMB <= fit {
		return askedMB
	}
	m.log.Info("memory asked for is more than the engine's host can back; lowered (set SANDBOX_MAX_MEMORY_MB to give requests in full)",
		"session_key", key, "asked_mb", askedMB, "given_mb", fit, "host_mb", m.hostMB)
	return fit
}
