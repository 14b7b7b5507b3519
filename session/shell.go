package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// DefaultCwd is where a command runs unless it names another folder.
const DefaultCwd = "/session"

// MaxCommandLine is the longest command line accepted, in bytes.
const MaxCommandLine = 1 << 20

// ErrInvalidCommand means a command was refused before it ran: an empty or
// oversized line, a relative working folder, a bad environment name. The
// message names what is wrong.
var ErrInvalidCommand = errors.New("invalid command")

// Command is a shell command line to run in a session's container, beside
// its kernel: bash -c Line, as the sandbox user, in Cwd, with the
// session's variables (session.Env) and then Env added to the container's
// environment.
type Command struct {
	Line    string            // run by bash -c
	Cwd     string            // absolute; "" = DefaultCwd
	Env     map[string]string // added to the environment; names [A-Za-z_][A-Za-z0-9_]*
	Timeout time.Duration     // 0 = EXEC_TIMEOUT_S; at expiry every process of the command is killed
	// Stdout and Stderr, when set, receive the command's output as it
	// comes (the head of each stream, then the note of a cut and the
	// tail: what the result keeps). Writes happen on the reading
	// goroutine: a slow writer slows the command; an error from one is
	// ignored.
	Stdout, Stderr io.Writer
	// Admission, when set, is the place the caller took for this command
	// with Admit; Run then takes none of its own.
	Admission *Admission
}

// CommandResult is how a command ended.
type CommandResult struct {
	Session  string // the session key
	ID       string // the command's id in the history
	Line     string
	ExitCode int    // the command's; 128+n when a signal n killed it
	Signal   string // "SIGKILL" and the like when a signal killed it
	Stdout   string // capped by MAX_OUTPUT_BYTES, head and tail kept
	Stderr   string
	// Truncated maps a stream name to the bytes cut from its middle.
	Truncated   map[string]int64
	TimedOut    bool // its timeout killed it
	Interrupted bool // the caller's context ended (or KillCommand) and killed it
	Started     time.Time
	Duration    time.Duration
	// Warnings say what went wrong around the command without changing
	// its result (the history could not record it).
	Warnings []string
}

// MarshalJSON writes the shape `agentbox sh --json` prints.
func (r *CommandResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Session    string           `json:"session"`
		ID         string           `json:"id"`
		ExitCode   int              `json:"exit_code"`
		Signal     string           `json:"signal,omitempty"`
		Stdout     string           `json:"stdout"`
		Stderr     string           `json:"stderr"`
		DurationMS float64          `json:"duration_ms"`
		TimedOut   bool             `json:"timed_out"`
		Interrupt  bool             `json:"interrupted"`
		Truncated  map[string]int64 `json:"truncated,omitempty"`
		Warnings   []string         `json:"warnings,omitempty"`
	}{r.Session, r.ID, r.ExitCode, r.Signal, r.Stdout, r.Stderr,
		float64(r.Duration.Microseconds()) / 1000, r.TimedOut, r.Interrupted, r.Truncated, r.Warnings})
}

// CommandError is a command that could not start in its container: its
// working folder is missing or not the sandbox user's to enter, or bash
// could not start. It wraps the system's error, so errors.Is(err,
// fs.ErrNotExist) and errors.Is(err, fs.ErrPermission) work.
type CommandError struct {
	Op   string // "chdir", "start bash", ...
	Path string // the folder or program, when there is one
	Err  error
}

func (e *CommandError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s %s: %v", e.Op, e.Path, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Op, e.Err)
}

func (e *CommandError) Unwrap() error { return e.Err }

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// check refuses what bash or the supervisor would misread, naming it.
func (c *Command) check() error {
	switch {
	case strings.TrimSpace(c.Line) == "":
		return fmt.Errorf("%w: empty command line", ErrInvalidCommand)
	case len(c.Line) > MaxCommandLine:
		return fmt.Errorf("%w: command line of %d bytes, at most %d", ErrInvalidCommand, len(c.Line), MaxCommandLine)
	case strings.ContainsRune(c.Line, 0):
		return fmt.Errorf("%w: the command line holds a NUL byte", ErrInvalidCommand)
	case c.Timeout < 0:
		return fmt.Errorf("%w: timeout %s: want 0 (the default) or more", ErrInvalidCommand, c.Timeout)
	}
	if c.Cwd != "" && (!strings.HasPrefix(c.Cwd, "/") || strings.ContainsRune(c.Cwd, 0)) {
		return fmt.Errorf("%w: working folder %q: want an absolute path in the sandbox", ErrInvalidCommand, c.Cwd)
	}
	for k, v := range c.Env {
		if !envName.MatchString(k) {
			return fmt.Errorf("%w: environment variable name %q: want letters, digits and _, not starting with a digit", ErrInvalidCommand, k)
		}
		if strings.HasPrefix(k, "AGENTBOX_") {
			return fmt.Errorf("%w: environment variable %s: the AGENTBOX_ prefix is reserved", ErrInvalidCommand, k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("%w: environment variable %s: its value holds a NUL byte", ErrInvalidCommand, k)
		}
	}
	return nil
}

// supervisorSpec is what the supervisor reads first.
type supervisorSpec struct {
	Line      string            `json:"line"`
	Cwd       string            `json:"cwd"`
	Env       map[string]string `json:"env,omitempty"`
	Timeout   float64           `json:"timeout"` // seconds; 0 = none
	Grace     float64           `json:"grace"`   // seconds between SIGTERM and SIGKILL
	MaxOutput int               `json:"max_output"`
	// Confirm: the supervisor is a spare (started ahead, so whether its
	// container runs is not known); it answers an "r" frame and starts
	// the command on the host's 'g'.
	Confirm bool `json:"confirm,omitempty"`
}

// outcome is the supervisor's last frame.
type outcome struct {
	Error *struct {
		Op      string `json:"op"`
		Path    string `json:"path"`
		Errno   string `json:"errno"`
		Message string `json:"message"`
	} `json:"error"`
	ExitCode  *int             `json:"exit_code"`
	Signal    string           `json:"signal"`
	Reason    string           `json:"reason"` // "timeout", "interrupted" or ""
	Duration  float64          `json:"duration"`
	Truncated map[string]int64 `json:"truncated"`
}

// errnos maps the errno names the supervisor reports onto this system's,
// so that errors.Is works on them; others are kept as text.
var errnos = map[string]syscall.Errno{
	"ENOENT": syscall.ENOENT, "EACCES": syscall.EACCES, "EPERM": syscall.EPERM,
	"ENOTDIR": syscall.ENOTDIR, "ELOOP": syscall.ELOOP, "ENAMETOOLONG": syscall.ENAMETOOLONG,
	"ENOMEM": syscall.ENOMEM, "EAGAIN": syscall.EAGAIN, "E2BIG": syscall.E2BIG,
}

func (o *outcome) startError() error {
	e := o.Error
	var cause error = errors.New(e.Message)
	if n, ok := errnos[e.Errno]; ok {
		cause = n
	}
	return &CommandError{Op: e.Op, Path: e.Path, Err: cause}
}

// supervisorCommand is what the driver runs for a command.
func supervisorCommand() []string {
	return []string{"python3", "-I", "-S", "-B", sandboximage.SupervisorPath}
}

// supervisorUser runs the supervisor as the init does (see
// sandbox-image/agentbox_supervisor.py).
const supervisorUser = sandboximage.BridgeUser

// newCommandID names a command in the history, apart from executions.
func newCommandID() string { return "cmd-" + kernel.NewID() }
