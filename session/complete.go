package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// Completeness says whether source typed at an interactive prompt is ready
// to run, as Python's own prompt decides it.
type Completeness string

const (
	// Complete is a whole statement: run it.
	Complete Completeness = "complete"
	// Incomplete has a block, a bracket or a string still open: read
	// another line.
	Incomplete Completeness = "incomplete"
	// Invalid cannot grow into one statement: a syntax error such as
	// "def f(:", or several statements pasted at once. Run it: the kernel
	// reports the SyntaxError, or runs the statements as one cell.
	Invalid Completeness = "invalid"
)

// completeTimeout bounds one completeness check, whatever the caller's
// context says: the helper is a sandbox process.
const completeTimeout = 10 * time.Second

// maxCompleteAnswer is the most output of the helper read.
const maxCompleteAnswer = 64

// IsComplete reports whether source, the lines typed at a prompt so far
// joined by "\n", is ready to run, by the rules of Python's interactive
// prompt (codeop) as the session's own Python applies them: "def f():"
// waits for its body and a blank line, "def f(:" is Invalid at once. It
// asks a short helper process in the session's container (started if
// needed), as the sandbox user, beside the kernel: nothing is executed in
// the session's namespace, counted or recorded. The driver must be able
// to run commands (the Docker driver can; errors.ErrUnsupported
// otherwise).
func (m *Manager) IsComplete(ctx context.Context, key, source string) (Completeness, error) {
	if err := m.begin(); err != nil {
		return "", err
	}
	defer m.calls.Done()
	e, release, err := m.acquire(ctx, key, true)
	if err != nil {
		return "", err
	}
	defer release()
	fail := func(err error) (Completeness, error) {
		return "", &Error{Op: "check input", Key: key, ContainerID: e.containerID, Err: err}
	}
	cr, ok := m.drv.(commandRunner)
	if !ok {
		return fail(fmt.Errorf("the driver cannot run commands in a container: %w", errors.ErrUnsupported))
	}
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	out, err := cr.RunCommand(ctx, e.containerID, m.cfg.User,
		[]string{"python3", "-I", "-S", "-B", sandboximage.ProbesPath, "complete"}, strings.NewReader(source), maxCompleteAnswer)
	if err != nil {
		return fail(err)
	}
	switch c := Completeness(strings.TrimSpace(string(out))); c {
	case Complete, Incomplete, Invalid:
		return c, nil
	}
	return fail(fmt.Errorf("unexpected answer %q", out))
}
