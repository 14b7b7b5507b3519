package kernel

import (
	"encoding/json"
	"time"
)

// ProtocolVersion is the version of the wire protocol this package speaks. It
// must equal PROTOCOL in sandbox-image/agentbox_init.py; an image that
// announces another version is stale and must be rebuilt with sandbox-setup.
const ProtocolVersion = 4

// MaxFrame is the largest frame either side accepts (a 1 MiB source escapes to
// at most 6 MiB of JSON; outputs are capped far below this).
const MaxFrame = 256 << 20

// Hello is the first frame the init sends on every new connection.
type Hello struct {
	Protocol       int     `json:"protocol"`
	InitPID        int     `json:"init_pid"`
	KernelPID      int     `json:"kernel_pid"`
	Python         string  `json:"python"`
	Restarts       int     `json:"restarts"`        // kernel restarts since the container started
	ExecutionCount int     `json:"execution_count"` // executions so far
	Busy           bool    `json:"busy"`            // an execution is running
	Started        float64 `json:"started"`         // Unix time the init started
	MaxOutput      int     `json:"max_output"`      // per-stream output cap, bytes
	// Tools the init runs for the host (Client.Spawn): ToolFiles,
	// ToolCommand. Protocol 2.
	Tools []string `json:"tools"`
}

// EventType names the frames of an execution as they stream.
type EventType string

// Event types.
const (
	EventStarted EventType = "started" // the kernel began running the code
	EventStream  EventType = "stream"  // output on stdout or stderr
	EventDisplay EventType = "display" // a rich result (display() or the trailing expression) or a figure
)

// Event is one frame of a running execution, delivered as it happens.
type Event struct {
	Type           EventType         `json:"type"`
	ID             string            `json:"id"`
	Name           string            `json:"name,omitempty"` // stream: "stdout" or "stderr"
	Text           string            `json:"text,omitempty"` // stream: the text (invalid UTF-8 replaced)
	Kind           string            `json:"kind,omitempty"` // display: "execute_result" or "display_data"
	Data           map[string]string `json:"data,omitempty"` // display: MIME type -> content (base64 for images)
	ExecutionCount int               `json:"execution_count,omitempty"`
}

// Output is a rich result in notebook shape: a MIME bundle such as
// {"text/plain": "42", "text/html": "<table>..."}; image data is base64.
type Output struct {
	Kind string            `json:"kind"` // "execute_result" (the trailing expression) or "display_data"
	Data map[string]string `json:"data"`
}

// Exception is a Python exception raised by the code. It is data, not a Go
// error: the execution itself worked.
type Exception struct {
	Name      string   `json:"name"`      // e.g. "ZeroDivisionError"; KernelDied, OutOfMemory and KernelKilled when the kernel was lost
	Value     string   `json:"value"`     // str(exception)
	Traceback []string `json:"traceback"` // lines of the user's code only
}

// Result is everything one execution produced.
type Result struct {
	ID              string           `json:"id"`
	ExecutionCount  int              `json:"execution_count"`
	Stdout          string           `json:"stdout"`
	Stderr          string           `json:"stderr"`
	Outputs         []Output         `json:"results"`
	Error           *Exception       `json:"error"`
	TimedOut        bool             `json:"timed_out"`        // the timeout or the caller's deadline interrupted it
	Interrupted     bool             `json:"interrupted"`      // an explicit interrupt or cancellation stopped it
	KernelRestarted bool             `json:"kernel_restarted"` // the kernel restarted during or before it
	StateLost       bool             `json:"state_lost"`       // variables and imports from before are gone
	RestartReason   string           `json:"restart_reason,omitempty"`
	Truncated       map[string]int64 `json:"truncated,omitempty"` // stream name -> bytes cut from the middle
	Duration        time.Duration    `json:"-"`
	// Files lists ExecRequest.ScanDir as the execution left it (More: the
	// list stopped at ScanMax). Not set on replayed results.
	Files    []File `json:"-"`
	More     bool   `json:"-"`
	Replayed bool   `json:"replayed"` // the result was recorded earlier: the code did not run again
}

// Variable describes one name of the kernel's namespace.
type Variable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Repr  string `json:"repr"`
	Size  *int64 `json:"size,omitempty"` // bytes, where cheap to know
	Shape []any  `json:"shape,omitempty"`
	Len   *int64 `json:"len,omitempty"`
}

// Module is a module bound to a name in the namespace.
type Module struct {
	Name   string `json:"name"`
	Module string `json:"module"`
}

// State is a summary of the kernel's namespace.
type State struct {
	Variables []Variable `json:"variables"`
	Modules   []Module   `json:"modules"`
}

// File is an entry of a folder the kernel scanned (Client.Scan).
type File struct {
	Path    string `json:"path"` // relative to the scanned folder, slash-separated
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	Kind    string `json:"kind"` // "file", "link" (never followed), "other" (fifo, socket, device) or "badname" (not UTF-8)
}

// scanOpt asks an execute to list a folder into its result.
type scanOpt struct {
	Path string `json:"path"`
	Max  int    `json:"max"`
}

// frame is any frame from the init; fields are the union of all types.
type frame struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Req   string `json:"req"`
	Code  string `json:"code"`    // error frames
	Msg   string `json:"message"` // error frames
	Event        // stream, display, started
	// result frames
	Status          string           `json:"status"`
	Error           *Exception       `json:"error"`
	TimedOut        bool             `json:"timed_out"`
	Interrupted     bool             `json:"interrupted"`
	KernelRestarted bool             `json:"kernel_restarted"`
	StateLost       bool             `json:"state_lost"`
	RestartReason   string           `json:"restart_reason"`
	Truncated       map[string]int64 `json:"truncated"`
	DurationMS      float64          `json:"duration_ms"`
	Replayed        bool             `json:"replayed"`
	Duplicate       bool             `json:"duplicate"`
	// files frames
	Files []File `json:"files"`
	More  bool   `json:"more"`
	// tool frames: the bytes that follow (out, err) or were taken (ack),
	// and the process (spawned)
	N   int `json:"n"`
	Pid int `json:"pid"`
	raw json.RawMessage
}

// request is any frame to the init.
type request struct {
	Type    string   `json:"type"`
	Req     string   `json:"req,omitempty"`
	ID      string   `json:"id,omitempty"`
	Code    *string  `json:"code,omitempty"`
	Timeout *float64 `json:"timeout,omitempty"`
	Path    string   `json:"path,omitempty"`
	Max     int      `json:"max,omitempty"`
	Scan    *scanOpt `json:"scan,omitempty"`
	Tool    string   `json:"tool,omitempty"` // spawn
	N       int      `json:"n,omitempty"`    // in, ack
}
