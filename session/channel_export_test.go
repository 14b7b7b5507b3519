package session

// OpenChannels is how many containers' channels m holds (channel.go).
func OpenChannels(m *Manager) int {
	m.chans.mu.Lock()
	defer m.chans.mu.Unlock()
	return len(m.chans.byID)
}
