package opensandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
)

// OpenSandbox's sandbox states, as this server reports them.
const (
	StateRunning    = "Running"
	StatePaused     = "Paused"
	StateTerminated = "Terminated"
	StateFailed     = "Failed"
)

// ExtensionIdleAction is the create extension that sets what the idle
// timeout does to the sandbox: "stop" (delete it) or "pause" (Paused,
// reason "idle"; its next execd call resumes it). Default IDLE_ACTION.
const ExtensionIdleAction = "agentbox.idleAction"

// idleEntrypoint is the entrypoint every sandbox reports: the container's
// init idles waiting for work, which is what the SDK's default asks for.
var idleEntrypoint = []string{"tail", "-f", "/dev/null"}

// idleEntrypoints are the entrypoints a create may name: ones that only
// wait, which agentbox's init already does.
var idleEntrypoints = [][]string{
	idleEntrypoint,
	{"sleep", "infinity"},
	{"/bin/sleep", "infinity"},
	{"/usr/bin/tail", "-f", "/dev/null"},
}

// minTimeout is OpenSandbox's smallest timeout, in seconds.
const minTimeout = 60

// maxSeconds keeps seconds from overflowing a time.Duration.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// timeFormat writes times in UTC with milliseconds: RFC 3339, which every
// ISO parser reads (some refuse more than 6 fractional digits).
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// wireTime is a time written in timeFormat.
type wireTime time.Time

func (t wireTime) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(timeFormat) + `"`), nil
}

type sandboxStatus struct {
	State            string    `json:"state"`
	Reason           string    `json:"reason,omitempty"`
	Message          string    `json:"message,omitempty"`
	LastTransitionAt *wireTime `json:"lastTransitionAt,omitempty"`
}

type imageSpec struct {
	URI string `json:"uri"`
}

// sandbox is OpenSandbox's Sandbox (and, without Image, its
// CreateSandboxResponse).
type sandbox struct {
	ID         string            `json:"id"`
	Image      *imageSpec        `json:"image,omitempty"`
	Status     sandboxStatus     `json:"status"`
	Metadata   map[string]string `json:"metadata"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  *wireTime         `json:"expiresAt,omitempty"` // absent: no expiry
	CreatedAt  wireTime          `json:"createdAt"`
}

type pagination struct {
	Page        int  `json:"page"`
	PageSize    int  `json:"pageSize"`
	TotalItems  int  `json:"totalItems"`
	TotalPages  int  `json:"totalPages"`
	HasNextPage bool `json:"hasNextPage"`
}

type listResponse struct {
	Items      []sandbox  `json:"items"`
	Pagination pagination `json:"pagination"`
}

type endpointResponse struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers"`
}

type renewResponse struct {
	ExpiresAt wireTime `json:"expiresAt"`
}

// status maps a session's state onto OpenSandbox's.
func status(info session.Info) sandboxStatus {
	s := sandboxStatus{}
	switch info.State {
	case session.StateRunning:
		s.State = StateRunning
	case session.StatePaused:
		s.State = StatePaused
		s.Reason = "paused"
		if info.PausedBy == session.PausedByIdle {
			// Not a user's pause: the next execd call resumes it.
			s.Reason, s.Message = "idle", "paused after its idle timeout; its next call resumes it"
		}
		if !info.Paused.IsZero() {
			t := wireTime(info.Paused)
			s.LastTransitionAt = &t
		}
	case session.StateStopped:
		s.State = StateTerminated
		s.Reason = "stopped"
		s.Message = info.StopReason
	case session.StateLost:
		s.State = StateFailed
		s.Reason = "lost"
		s.Message = info.StopReason
	default:
		// List reports the engine's words ("exited", "dead", ...): a
		// container that is neither running nor paused has ended.
		s.State = StateFailed
		s.Reason = info.State
	}
	return s
}

// toSandbox describes a session as OpenSandbox's Sandbox.
func toSandbox(id string, info session.Info, cfg config.Config) sandbox {
	sb := sandbox{
		ID:         id,
		Status:     status(info),
		Metadata:   info.Labels,
		Entrypoint: idleEntrypoint,
		CreatedAt:  wireTime(info.Created),
	}
	if sb.Metadata == nil {
		sb.Metadata = map[string]string{}
	}
	if !info.Expires.IsZero() {
		t := wireTime(info.Expires)
		sb.ExpiresAt = &t
	}
	if ref, ok := cfg.ImageRef(info.Image); ok {
		sb.Image = &imageSpec{URI: ref}
	} else if info.Image != "" {
		sb.Image = &imageSpec{URI: info.Image}
	}
	return sb
}

// badRequest is an input error: a 400 (or 413) with its message.
type badRequest struct {
	status int
	code   string
	msg    string
}

func (e *badRequest) Error() string { return e.msg }

func invalid(format string, args ...any) *badRequest {
	return &badRequest{status: http.StatusBadRequest, code: codeInvalidParameter, msg: fmt.Sprintf(format, args...)}
}

// decodeStrict reads one JSON value into v, refusing unknown fields,
// trailing data and bodies over the cap.
func decodeStrict(body io.Reader, v any, what string) error {
	return decode(body, v, what, true)
}

func decode(body io.Reader, v any, what string, strict bool) error {
	data, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &badRequest{status: http.StatusRequestEntityTooLarge, code: codeTooLarge, msg: tooLargeMessage(mbe.Limit)}
		}
		return &badRequest{status: http.StatusBadRequest, code: codeInvalidJSON, msg: "read request body: " + err.Error()}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return &badRequest{status: http.StatusBadRequest, code: codeInvalidJSON, msg: what + ": a JSON object is required"}
	}
	return decodeBytes(data, v, what, strict)
}

func decodeBytes(data []byte, v any, what string, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return &badRequest{status: http.StatusBadRequest, code: codeInvalidJSON, msg: what + ": " + jsonMessage(err)}
	}
	if dec.More() {
		return &badRequest{status: http.StatusBadRequest, code: codeInvalidJSON, msg: what + ": unexpected data after the JSON value"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &badRequest{status: http.StatusBadRequest, code: codeInvalidJSON, msg: what + ": unexpected data after the JSON value"}
	}
	return nil
}

// jsonMessage says what is wrong with a body in terms of its fields.
func jsonMessage(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return "want a JSON object, got " + te.Value
		}
		return "field " + field + ": want " + jsonType(te.Type.String()) + ", got " + te.Value
	case errors.As(err, &se):
		return "malformed JSON at byte " + strconv.FormatInt(se.Offset, 10) + ": " + se.Error()
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end"
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return msg
}

func jsonType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["):
		return "an object of strings"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.Contains(goType, "Number"), strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "float"):
		return "a number"
	}
	return "an object"
}

// createRequest is OpenSandbox's CreateSandboxRequest. Its top level allows
// fields this server does not know (the spec does), the nested objects do
// not.
type createRequest struct {
	Image           json.RawMessage   `json:"image"`
	SnapshotID      json.RawMessage   `json:"snapshotId"`
	Platform        json.RawMessage   `json:"platform"`
	Timeout         json.RawMessage   `json:"timeout"` // absent, null or an integer
	ResourceLimits  map[string]string `json:"resourceLimits"`
	Env             map[string]string `json:"env"`
	Metadata        map[string]string `json:"metadata"`
	Entrypoint      []string          `json:"entrypoint"`
	NetworkPolicy   json.RawMessage   `json:"networkPolicy"`
	CredentialProxy json.RawMessage   `json:"credentialProxy"`
	SecureAccess    *bool             `json:"secureAccess"`
	Volumes         json.RawMessage   `json:"volumes"`
	Extensions      map[string]string `json:"extensions"`
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// startOptions checks a create request and turns it into the Manager's
// options. The Manager checks the values (maxima, env names, label keys);
// this checks the shape, and refuses what agentbox cannot honour.
func startOptions(req createRequest, cfg config.Config) ([]session.StartOption, error) {
	var opts []session.StartOption
	if !isNull(req.SnapshotID) {
		return nil, invalid("snapshotId: agentbox has no snapshots; create from an image")
	}
	if !isNull(req.Image) {
		var img struct {
			URI  string          `json:"uri"`
			Auth json.RawMessage `json:"auth"` // nothing is pulled; never logged
		}
		if err := decodeBytes(req.Image, &img, "image", true); err != nil {
			return nil, err
		}
		if strings.TrimSpace(img.URI) == "" {
			return nil, invalid("image.uri is required")
		}
		opts = append(opts, session.UseImage(imageName(img.URI, cfg)))
	}
	if !isNull(req.Platform) {
		var p struct {
			OS   string `json:"os"`
			Arch string `json:"arch"`
		}
		if err := decodeBytes(req.Platform, &p, "platform", true); err != nil {
			return nil, err
		}
		if p.OS != "linux" || p.Arch != runtime.GOARCH {
			return nil, invalid("platform %s/%s: this server runs linux/%s only", p.OS, p.Arch, runtime.GOARCH)
		}
	}
	if req.Timeout != nil { // present; null is no expiry
		ttl, err := parseTimeout(req.Timeout)
		if err != nil {
			return nil, err
		}
		opts = append(opts, session.TTL(ttl))
	}
	lim, err := parseLimits(req.ResourceLimits)
	if err != nil {
		return nil, err
	}
	opts = append(opts, lim...)
	if len(req.Env) > 0 {
		opts = append(opts, session.Env(req.Env))
	}
	if len(req.Metadata) > 0 {
		for k := range req.Metadata {
			if strings.HasPrefix(k, "opensandbox.io/") {
				return nil, invalid("metadata key %q: the opensandbox.io/ prefix is reserved", k)
			}
		}
		opts = append(opts, session.Labels(req.Metadata))
	}
	if len(req.Entrypoint) > 0 && !slices.ContainsFunc(idleEntrypoints, func(e []string) bool { return slices.Equal(e, req.Entrypoint) }) {
		return nil, invalid("entrypoint %q: agentbox runs its own init, which waits for commands and code; only an idle entrypoint such as [\"tail\", \"-f\", \"/dev/null\"] is accepted (start programs with commands instead)", req.Entrypoint)
	}
	if req.Entrypoint != nil && len(req.Entrypoint) == 0 {
		return nil, invalid("entrypoint: want at least one item")
	}
	if !isNull(req.NetworkPolicy) {
		return nil, invalid("networkPolicy: not supported; the sandbox network is the operator's (SANDBOX_NETWORK=%s)", cfg.Network)
	}
	if !isNull(req.CredentialProxy) {
		var cp struct {
			Enabled bool `json:"enabled"`
		}
		if err := decodeBytes(req.CredentialProxy, &cp, "credentialProxy", true); err != nil {
			return nil, err
		}
		if cp.Enabled {
			return nil, invalid("credentialProxy: not supported")
		}
	}
	if !isNull(req.Volumes) && string(bytes.TrimSpace(req.Volumes)) != "[]" {
		return nil, invalid("volumes: not supported; write files into the sandbox with the files API")
	}
	if _, ok := req.Extensions["access.renew.extend.seconds"]; ok {
		return nil, invalid("extensions: access.renew.extend.seconds (renew on access) is not supported; renew with renew-expiration")
	}
	if v, ok := req.Extensions[ExtensionIdleAction]; ok {
		a := config.IdleAction(strings.ToLower(strings.TrimSpace(v)))
		if !a.Valid() {
			return nil, invalid("extensions: %s %q: want stop or pause", ExtensionIdleAction, truncate(v, 32))
		}
		opts = append(opts, session.OnIdle(a))
	}
	// The spec requires image (or a snapshot, refused above): a create
	// without one is a client's mistake, not a request for the default.
	// Checked last, so a body with other faults hears of those too.
	if isNull(req.Image) {
		return nil, invalid("image is required: send {\"image\": {\"uri\": \"...\"}} (an image not in SANDBOX_IMAGES runs as SANDBOX_IMAGE=%s)", cfg.SandboxImage)
	}
	return opts, nil
}

// imageName maps a requested image onto a name the Manager knows: an
// allowed name (SANDBOX_IMAGES) or its reference; anything else, such as
// the SDK examples' python:3.11, runs as the configured sandbox image
// ("default"), and get says so.
func imageName(uri string, cfg config.Config) string {
	if _, ok := cfg.ImageRef(uri); ok {
		return uri
	}
	for name, ref := range cfg.SandboxImages {
		if ref == uri {
			return name
		}
	}
	return config.DefaultImageName
}

// parseTimeout reads the timeout: null is no expiry (0), an integer is
// seconds, at least 60 as OpenSandbox asks.
func parseTimeout(raw json.RawMessage) (time.Duration, error) {
	if isNull(raw) {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		return 0, invalid("timeout: want whole seconds (an integer of at least %d) or null for no expiry, got %s", minTimeout, truncate(string(raw), 40))
	}
	if n < minTimeout || n > maxSeconds {
		return 0, invalid("timeout: want at least %d seconds, or null for no expiry; got %d", minTimeout, n)
	}
	return time.Duration(n) * time.Second, nil
}

// parseLimits reads resourceLimits: cpu ("500m", "1", "0.5") and memory
// ("512Mi", "2Gi", "1G", bytes). A gpu of 0 is accepted; anything else is
// refused, since it could not be honoured.
func parseLimits(lim map[string]string) ([]session.StartOption, error) {
	var opts []session.StartOption
	for _, k := range slices.Sorted(maps.Keys(lim)) {
		v := strings.TrimSpace(lim[k])
		switch k {
		case "cpu":
			cpus, err := parseCPU(v)
			if err != nil {
				return nil, err
			}
			opts = append(opts, session.CPUs(cpus))
		case "memory":
			mb, err := parseMemory(v)
			if err != nil {
				return nil, err
			}
			opts = append(opts, session.MemoryMB(mb))
		case "gpu", "nvidia.com/gpu":
			if n, err := strconv.ParseFloat(v, 64); err != nil || n != 0 {
				return nil, invalid("resourceLimits.%s %q: this server has no GPUs", k, v)
			}
		default:
			return nil, invalid("resourceLimits.%s: unknown resource; want cpu or memory", k)
		}
	}
	return opts, nil
}

// parseCPU reads Kubernetes' CPU quantity: millicores ("500m") or cores.
func parseCPU(v string) (float64, error) {
	bad := invalid("resourceLimits.cpu %q: want cores (\"1\", \"0.5\") or millicores (\"500m\")", v)
	var f float64
	var err error
	if s, ok := strings.CutSuffix(v, "m"); ok {
		var n int64
		n, err = strconv.ParseInt(s, 10, 64)
		f = float64(n) / 1000
	} else {
		f, err = strconv.ParseFloat(v, 64)
	}
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, bad
	}
	return f, nil
}

// memUnits are Kubernetes' memory suffixes.
var memUnits = []struct {
	suffix string
	bytes  float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// parseMemory reads Kubernetes' memory quantity and returns whole MiB,
// rounded up (a limit is never made smaller than asked).
func parseMemory(v string) (int, error) {
	bad := invalid("resourceLimits.memory %q: want a quantity such as \"512Mi\", \"2Gi\" or bytes", v)
	mult := 1.0
	num := v
	for _, u := range memUnits {
		if s, ok := strings.CutSuffix(v, u.suffix); ok {
			num, mult = s, u.bytes
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, bad
	}
	mb := math.Ceil(f * mult / (1 << 20))
	if mb > math.MaxInt32 {
		return 0, invalid("resourceLimits.memory %q: too large", v)
	}
	return int(mb), nil
}

// parseExpiry reads renew-expiration's expiresAt.
func parseExpiry(s string, now time.Time) (time.Duration, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, &badRequest{status: http.StatusBadRequest, code: codeInvalidExpiry, msg: "expiresAt " + strconv.Quote(truncate(s, 64)) + ": want an RFC 3339 time such as 2025-11-16T14:30:45Z"}
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, &badRequest{status: http.StatusBadRequest, code: codeInvalidExpiry, msg: "expiresAt " + s + " is not in the future"}
	}
	return d, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
