package session

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// commandProbe prints how many shell supervisors run in a container: root
// processes whose command line starts with the supervisor's first line.
// Sandbox code cannot start a root process, so it cannot fake one. The
// mark is assembled at run time so that the probe does not count itself.
const commandProbe = `import os
mark = ("# agentbox-shell-" + "supervisor").encode()
n = 0
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        with open("/proc/%s/status" % pid, "rb") as f:
            uid = [l for l in f.read().splitlines() if l.startswith(b"Uid:")][0].split()[1]
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
    except (OSError, IndexError):
        continue
    if uid == b"0" and any(a.startswith(mark) for a in argv):
        n += 1
print(n)
`

// commandProbeTimeout bounds the probe: a container that cannot answer it
// in that time cannot be running a command anyone can use either.
const commandProbeTimeout = 5 * time.Second

// commandsRunning counts the shell commands running in container id,
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
	s, err := cs.StreamCommand(ctx, id, supervisorUser, []string{"python3", "-I", "-S", "-B", "-c", commandProbe})
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
