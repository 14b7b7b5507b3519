package session

import "context"

// OpenChannels is how many containers' channels m holds (channel.go).
func OpenChannels(m *Manager) int {
	m.chans.mu.Lock()
	defer m.chans.mu.Unlock()
	return len(m.chans.byID)
}

// CommandsRunning is what the sweep counts as running commands in the
// container of session key (shell_probe.go).
func CommandsRunning(ctx context.Context, m *Manager, containerID string) (int, error) {
	return m.commandsRunning(ctx, containerID)
}
