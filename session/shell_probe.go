package session

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// commandProbeTimeout bounds the probe: a container that cannot answer it
// in that time cannot be running a command anyone can use either.
const commandProbeTimeout = 5 * time.Second

// commandsRunning counts the shell commands running in container id (root
// processes running the supervisor: sandbox code cannot start one, so it
// cannot fake one; see sandbox-image/agentbox_probes.py),
// whichever process started them: what the engine shows, not this
// Manager's memory, so that one manager's sweep does not evict a session
// while another runs a command in it.
func (m *Manager) commandsRunning(ctx context.Context, id string) (int, error) {
	cs, ok := m.drv.(commandStreamer)
	if !ok {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, commandProbeTimeout)
	defer cancel()
	s, err := cs.StreamCommand(ctx, id, supervisorUser, []string{"python3", "-I", "-S", "-B", sandboximage.ProbesPath, "commands"})
	if err != nil {
		return 0, fmt.Errorf("look for commands in container %s: %w", shortID(id), err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	s.CloseWrite()
	out, err := io.ReadAll(io.LimitReader(s, 64))
	if err != nil {
		return 0, fmt.Errorf("look for commands in container %s: %w", shortID(id), err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("look for commands in container %s: the probe printed %q (%s)", shortID(id), out, lastLine(s.Stderr()))
	}
	return n, nil
}
