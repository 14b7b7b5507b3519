package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentbox/agentbox/config"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// Per-session options: what a new session is created with. They apply when
// a call creates the session (Start, or the first Exec with CreateWith);
// on a session that exists they are still checked, then ignored, since a
// container's environment, labels, limits and image are fixed when it is
// made. Info says what a session has.

var (
	// ErrInvalidOption means a per-session option is malformed or names
	// something the Manager keeps for itself (see OptionError).
	ErrInvalidOption = errors.New("invalid session option")
	// ErrAboveMaximum means a per-session option asks for more than the
	// operator allows (SANDBOX_MAX_MEMORY_MB, SANDBOX_MAX_CPUS,
	// SESSION_MAX_TTL_S). It is never trimmed to the maximum.
	ErrAboveMaximum = errors.New("above the configured maximum")
	// ErrImageNotAllowed means a session asked for an image by a name the
	// operator did not list (SANDBOX_IMAGES), or one that cannot serve.
	ErrImageNotAllowed = errors.New("sandbox image not allowed")
)

// OptionError is a per-session option the Manager refuses. It never
// carries an environment variable's value, which may be a secret.
type OptionError struct {
	Option string // "env", "labels", "ttl", "memory", "cpus" or "image"
	Name   string // the variable, label key or image name at fault; "" if none
	Want   string // what would be accepted
	Err    error  // ErrInvalidOption, ErrAboveMaximum or ErrImageNotAllowed
	Cause  error  // why an allowed image cannot serve (ErrImageMissing, ErrImageStale, ...); nil otherwise
}

func (e *OptionError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("%v: %s %s: %s", e.Err, e.Option, strconv.Quote(e.Name), e.Want)
	}
	return fmt.Sprintf("%v: %s: %s", e.Err, e.Option, e.Want)
}

func (e *OptionError) Unwrap() []error { return []error{e.Err, e.Cause} }

// StartOption sets what a new session is made with: Env, Labels, TTL,
// MemoryMB, CPUs, UseImage or OnIdle. Options apply in order; a later one of the
// same kind adds to (Env, Labels) or replaces (the others) an earlier
// one. The zero StartOption changes nothing.
type StartOption struct{ apply func(*startOptions) }

type startOptions struct {
	env      map[string]string
	meta     map[string]string
	ttl      *time.Duration
	memoryMB int
	cpus     float64
	image    string
	// idleAction is OnIdle's; "" the configuration's.
	idleAction config.IdleAction
}

// Env sets environment variables of the session's processes (the Python
// code, and commands run in it), visible to no other session. They reach
// only the sandbox user's processes, never the container's root ones (see
// sandboximage.UserEnvPrefix), so PYTHONPATH and the like are taken. Names
// are letters, digits and underscores; a name the loader, a shell, the C
// library or agentbox itself reads at startup (LD_*, AGENTBOX_*, PATH,
// HOME, ...) is refused, as is one SANDBOX_ENV_PASSTHROUGH already sets.
func Env(vars map[string]string) StartOption {
	return StartOption{func(o *startOptions) {
		if o.env == nil {
			o.env = map[string]string{}
		}
		maps.Copy(o.env, vars)
	}}
}

// Labels sets metadata describing the session (an owner, a thread id),
// shown by Info and kept on its container as io.agentbox.meta.<key>. Keys
// are letters, digits and . _ / -, at most 128; values printable text, at
// most 1024 bytes.
func Labels(labels map[string]string) StartOption {
	return StartOption{func(o *startOptions) {
		if o.meta == nil {
			o.meta = map[string]string{}
		}
		maps.Copy(o.meta, labels)
	}}
}

// TTL sets the session's time to live (default SESSION_TTL_S): past it
// the session is removed, used or not, paused or not; Renew extends it. 0
// means none, refused when SESSION_MAX_TTL_S sets a maximum.
func TTL(d time.Duration) StartOption {
	return StartOption{func(o *startOptions) { o.ttl = &d }}
}

// MemoryMB sets the session's memory limit in MiB (default
// SANDBOX_MEMORY_MB), from 64 to config.Config.SessionMaxMemoryMB. With
// no SANDBOX_MAX_MEMORY_MB set, a limit the engine's host cannot back is
// lowered to what it can (never below SANDBOX_MEMORY_MB); Info shows the
// limit given.
func MemoryMB(n int) StartOption {
	return StartOption{func(o *startOptions) { o.memoryMB = n }}
}

// CPUs sets the session's CPU limit (default SANDBOX_CPUS), more than 0
// and at most SANDBOX_MAX_CPUS.
func CPUs(n float64) StartOption {
	return StartOption{func(o *startOptions) { o.cpus = n }}
}

// UseImage runs the session on the sandbox image the operator named name
// in SANDBOX_IMAGES ("default" is SANDBOX_IMAGE).
func UseImage(name string) StartOption {
	return StartOption{func(o *startOptions) { o.image = name }}
}

// CreateWith gives Exec the options of the session it creates when the key
// has none (see StartOption); on an existing session they are checked and
// ignored.
func CreateWith(opts ...StartOption) ExecOption {
	return ExecOption{func(o *execOptions) { o.start = append(o.start, opts...) }}
}

// creation is a checked set of per-session options.
type creation struct {
	env      []string          // NAME=value, sorted
	meta     map[string]string // metadata, without the label prefix
	ttl      time.Duration     // 0: none
	memoryMB int
	cpus     float64
	image    string // its name
	ref      string // its reference
	// idleAction is what the idle timeout does to it.
	idleAction config.IdleAction
	// custom is set when a warm container, made with the defaults, cannot
	// serve it.
	custom bool
}

// Labels of what a session was created with.
const (
	LabelImage    = "io.agentbox.image"     // the image's name, when not "default"
	LabelTTL      = "io.agentbox.ttl"       // time to live in seconds, when it has one
	LabelExpires  = "io.agentbox.expires"   // its first expiry, Unix seconds; the database holds renewals
	LabelMemoryMB = "io.agentbox.memory-mb" // when not SANDBOX_MEMORY_MB
	LabelCPUs     = "io.agentbox.cpus"      // when not SANDBOX_CPUS
	// LabelMetaPrefix begins the container label of each key of Labels.
	LabelMetaPrefix = "io.agentbox.meta."
)

// Bounds of per-session options.
const (
	minMemoryMB  = 64 // as SANDBOX_MEMORY_MB
	maxEnvVars   = 256
	maxEnvValue  = 32 << 10
	maxEnvBytes  = 256 << 10
	maxMetaKeys  = 64
	maxMetaValue = 1024
)

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	metaKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`)
)

// Environment variables a session may not set. A session's variables
// reach only the sandbox user's processes (applyCreation passes them under
// sandboximage.UserEnvPrefix; the root init, the kernel bridge and the
// command supervisor run Python with -I, which ignores PYTHON* and the
// user site folder). The variables below are refused all the same, as a
// second wall: they steer how any program starts, and a root process that
// saw one could be pointed at files the sandbox wrote (a BIND /session
// outlives its container). The dynamic loader reads LD_* in every process,
// shells BASH_ENV, ENV and IFS, glibc the rest; AGENTBOX_* are the init's
// own settings. OpenSSL reads OPENSSL_* (a config that loads modules and
// engines) and SSL_CERT_* (the trusted certificates); ncurses TERMINFO*;
// most code TMPDIR, TEMP and TMP. Locale and time zone names are taken,
// but not as paths (see pathEnv).
var (
	reservedEnvPrefixes = []string{"AGENTBOX_", "LD_", "GCONV_", "GLIBC_", "MALLOC_",
		"OPENSSL_", "SSL_CERT_", "TERMINFO"}
	reservedEnv = []string{"PATH", "HOME", "BASH_ENV", "ENV", "IFS", "SHELLOPTS", "BASHOPTS", "PS4",
		"LOCPATH", "NLSPATH", "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN", "TZDIR", "MPLCONFIGDIR",
		"TMPDIR", "TMP", "TEMP", "TEMPDIR"}
)

// pathEnv reports whether the value of name would make glibc load a file
// of the caller's choosing in a root process: a locale name (LANG,
// LANGUAGE, LC_*) holding a slash is a path to a locale, and a time zone
// (TZ) starting with ':' or '/', or climbing with "..", a path to a zone
// file. Plain names (C.UTF-8, Europe/Paris) are not.
func pathEnv(name, value string) bool {
	switch up := strings.ToUpper(name); {
	case up == "TZ":
		return strings.HasPrefix(value, ":") || strings.HasPrefix(value, "/") || strings.Contains(value, "..")
	case up == "LANG", up == "LANGUAGE", strings.HasPrefix(up, "LC_"):
		return strings.Contains(value, "/")
	}
	return false
}

// resolve checks opts against the configuration and returns what a new
// session is made with.
func (m *Manager) resolve(key string, opts []StartOption) (*creation, error) {
	var o startOptions
	for _, opt := range opts {
		if opt.apply != nil {
			opt.apply(&o)
		}
	}
	cfg := m.cfg
	cr := &creation{ttl: cfg.SessionTTL, memoryMB: cfg.MemoryMB, cpus: cfg.CPUs, image: config.DefaultImageName, ref: cfg.SandboxImage,
		idleAction: m.defaultIdleAction()}
	if o.idleAction != "" {
		if !o.idleAction.Valid() {
			return nil, &OptionError{Option: "idle action", Name: string(o.idleAction), Want: "want stop or pause", Err: ErrInvalidOption}
		}
		cr.idleAction = o.idleAction
	}
	var err error
	if cr.env, err = m.checkEnv(o.env); err != nil {
		return nil, err
	}
	if cr.meta, err = checkMetadata(o.meta); err != nil {
		return nil, err
	}
	if o.ttl != nil {
		if err := checkTTL("ttl", *o.ttl, cfg.MaxSessionTTL); err != nil {
			return nil, err
		}
		cr.ttl = *o.ttl
	}
	if o.memoryMB != 0 {
		max := cfg.SessionMaxMemoryMB()
		switch {
		case o.memoryMB < minMemoryMB:
			return nil, &OptionError{Option: "memory", Want: fmt.Sprintf("%d MiB: want at least %d MiB", o.memoryMB, minMemoryMB), Err: ErrInvalidOption}
		case o.memoryMB > max:
			return nil, &OptionError{Option: "memory", Want: fmt.Sprintf("%d MiB: at most %d MiB (SANDBOX_MAX_MEMORY_MB)", o.memoryMB, max), Err: ErrAboveMaximum}
		}
		cr.memoryMB = m.fitMemory(key, o.memoryMB)
	}
	if o.cpus != 0 {
		max := cfg.SessionMaxCPUs()
		switch {
		case !(o.cpus > 0) || math.IsInf(o.cpus, 0): // NaN fails o.cpus > 0
			return nil, &OptionError{Option: "cpus", Want: fmt.Sprintf("%g: want a number more than 0", o.cpus), Err: ErrInvalidOption}
		case o.cpus > max:
			return nil, &OptionError{Option: "cpus", Want: fmt.Sprintf("%g: at most %g (SANDBOX_MAX_CPUS)", o.cpus, max), Err: ErrAboveMaximum}
		}
		cr.cpus = o.cpus
	}
	if o.image != "" {
		ch, ok := m.images[o.image]
		if !ok {
			return nil, &OptionError{Option: "image", Name: o.image, Want: "not in SANDBOX_IMAGES: want one of " + strings.Join(m.cfg.ImageNames(), ", "), Err: ErrImageNotAllowed}
		}
		if ch.err != nil {
			return nil, &OptionError{Option: "image", Name: o.image, Want: fmt.Sprintf("%s cannot serve: %v", ch.ref, ch.err), Err: ErrImageNotAllowed, Cause: ch.err}
		}
		cr.image, cr.ref = o.image, ch.ref
	}
	cr.custom = len(cr.env) > 0 || len(cr.meta) > 0 || cr.memoryMB != cfg.MemoryMB || cr.cpus != cfg.CPUs || cr.image != config.DefaultImageName ||
		cr.idleAction != m.defaultIdleAction()
	return cr, nil
}

// checkTTL checks a time to live (of a new session, or a renewal) against
// SESSION_MAX_TTL_S.
func checkTTL(option string, d, max time.Duration) error {
	switch {
	case d < 0:
		return &OptionError{Option: option, Want: d.String() + ": want 0 (none) or more", Err: ErrInvalidOption}
	case max > 0 && d == 0:
		return &OptionError{Option: option, Want: "none: every session needs a time to live of at most " + max.String() + " (SESSION_MAX_TTL_S)", Err: ErrAboveMaximum}
	case max > 0 && d > max:
		return &OptionError{Option: option, Want: d.String() + ": at most " + max.String() + " (SESSION_MAX_TTL_S)", Err: ErrAboveMaximum}
	}
	return nil
}

func (m *Manager) checkEnv(vars map[string]string) ([]string, error) {
	if len(vars) > maxEnvVars {
		return nil, &OptionError{Option: "env", Want: fmt.Sprintf("%d variables: at most %d", len(vars), maxEnvVars), Err: ErrInvalidOption}
	}
	var out []string
	total := 0
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		v := vars[name]
		bad := func(want string) error {
			return &OptionError{Option: "env", Name: name, Want: want, Err: ErrInvalidOption}
		}
		switch {
		case !envNameRE.MatchString(name):
			return nil, bad("want letters, digits and underscores, not starting with a digit, at most 128")
		case reservedEnvName(name):
			return nil, bad("reserved: the dynamic loader, shells, the C library or agentbox read it when a program starts")
		case pathEnv(name, v):
			return nil, bad("its value is a path: the container's root processes would load a locale or time zone file from it; give a name such as C.UTF-8 or Europe/Paris")
		case slices.Contains(m.cfg.EnvPassthrough, name):
			return nil, bad("set by the operator for every session (SANDBOX_ENV_PASSTHROUGH)")
		case strings.IndexByte(v, 0) >= 0:
			return nil, bad("its value holds a NUL byte")
		case len(v) > maxEnvValue:
			return nil, bad(fmt.Sprintf("its value is %d bytes: at most %d", len(v), maxEnvValue))
		}
		total += len(name) + 1 + len(v)
		out = append(out, name+"="+v)
	}
	if total > maxEnvBytes {
		return nil, &OptionError{Option: "env", Want: fmt.Sprintf("%d bytes in all: at most %d", total, maxEnvBytes), Err: ErrInvalidOption}
	}
	return out, nil
}

func reservedEnvName(name string) bool {
	up := strings.ToUpper(name)
	for _, p := range reservedEnvPrefixes {
		if strings.HasPrefix(up, p) {
			return true
		}
	}
	return slices.Contains(reservedEnv, up)
}

func checkMetadata(labels map[string]string) (map[string]string, error) {
	if len(labels) > maxMetaKeys {
		return nil, &OptionError{Option: "labels", Want: fmt.Sprintf("%d labels: at most %d", len(labels), maxMetaKeys), Err: ErrInvalidOption}
	}
	if len(labels) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := labels[k]
		bad := func(want string) error {
			return &OptionError{Option: "labels", Name: k, Want: want, Err: ErrInvalidOption}
		}
		switch {
		case !metaKeyRE.MatchString(k):
			return nil, bad("want letters, digits and . _ / -, starting with a letter or digit, at most 128")
		case len(v) > maxMetaValue:
			return nil, bad(fmt.Sprintf("its value is %d bytes: at most %d", len(v), maxMetaValue))
		case !utf8.ValidString(v):
			return nil, bad("its value is not UTF-8")
		case strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }):
			// Newlines, escapes and bidirectional overrides would forge
			// lines and text where the value is shown.
			return nil, bad("its value holds control or formatting characters")
		}
		out[k] = v
	}
	return out, nil
}

// imageChoice is an allowed sandbox image as NewManager found it.
type imageChoice struct {
	ref string
	img Image
	err error // why it cannot serve
}

// resolveImages looks up every image of SANDBOX_IMAGES once; one that is
// missing or stale is refused, with the reason, when a session asks for
// it, and does not stop the Manager.
func (m *Manager) resolveImages(ctx context.Context) {
	m.images = map[string]imageChoice{config.DefaultImageName: {ref: m.cfg.SandboxImage, img: m.image}}
	for name, ref := range m.cfg.SandboxImages {
		img, err := m.drv.Image(ctx, ref)
		if err == nil {
			err = checkImage(ref, img)
		}
		if err != nil {
			m.log.Warn("sandbox image unusable", "image", name, "ref", ref, "err", err)
		}
		m.images[name] = imageChoice{ref: ref, img: img, err: err}
	}
	m.defaults, _ = m.resolve("", nil) // the configuration was validated
}

// knownImage reports whether image ID id is one of the allowed images.
func (m *Manager) knownImage(id string) bool {
	for _, ch := range m.images {
		if ch.err == nil && ch.img.ID == id {
			return true
		}
	}
	return id == m.image.ID
}

// applyCreation makes spec (from the configuration) what cr asks for.
func (m *Manager) applyCreation(spec *Spec, cr *creation, now time.Time) {
	if cr == nil {
		return
	}
	spec.Image = cr.ref
	spec.MemoryBytes = m.containerMemory(cr.memoryMB)
	spec.NanoCPUs = int64(cr.cpus * 1e9)
	for i, kv := range spec.Env {
		if strings.HasPrefix(kv, "AGENTBOX_MEMORY_LIMIT=") {
			spec.Env[i] = "AGENTBOX_MEMORY_LIMIT=" + strconv.FormatInt(int64(cr.memoryMB)<<20, 10)
		}
	}
	// Under a prefix, never by their own names: the container's
	// environment is its root init's (see sandboximage.UserEnvPrefix).
	for _, kv := range cr.env {
		spec.Env = append(spec.Env, sandboximage.UserEnvPrefix+kv)
	}
	if cr.image != config.DefaultImageName {
		spec.Labels[LabelImage] = cr.image
	}
	if cr.ttl > 0 {
		spec.Labels[LabelTTL] = strconv.FormatInt(int64((cr.ttl+time.Second-1)/time.Second), 10)
		// Rounded up: a label earlier than the expiry would have a
		// sweep that sees no record yet remove a session still live.
		spec.Labels[LabelExpires] = strconv.FormatInt((now.Add(cr.ttl).UnixMilli()+999)/1000, 10)
	}
	if cr.memoryMB != m.cfg.MemoryMB {
		spec.Labels[LabelMemoryMB] = strconv.Itoa(cr.memoryMB)
	}
	if cr.cpus != m.cfg.CPUs {
		spec.Labels[LabelCPUs] = strconv.FormatFloat(cr.cpus, 'f', -1, 64)
	}
	for k, v := range cr.meta {
		spec.Labels[LabelMetaPrefix+k] = v
	}
	if cr.idleAction != "" {
		spec.Labels[LabelIdleAction] = string(cr.idleAction)
	}
}

// creationOf reads back from its labels what container c was made with;
// what they do not say is the configuration's default.
func (m *Manager) creationOf(c Container) *creation {
	cr := &creation{memoryMB: m.cfg.MemoryMB, cpus: m.cfg.CPUs, image: config.DefaultImageName, ref: m.cfg.SandboxImage,
		idleAction: m.idleActionOf(c)}
	l := c.Labels
	if n, ok := l[LabelImage]; ok {
		cr.image = n
		if ch, ok := m.images[n]; ok {
			cr.ref = ch.ref
		}
	}
	if s, err := strconv.ParseInt(l[LabelTTL], 10, 64); err == nil && s > 0 {
		cr.ttl = time.Duration(s) * time.Second
	}
	if n, err := strconv.Atoi(l[LabelMemoryMB]); err == nil && n > 0 {
		cr.memoryMB = n
	}
	if f, err := strconv.ParseFloat(l[LabelCPUs], 64); err == nil && f > 0 {
		cr.cpus = f
	}
	for k, v := range l {
		if mk, ok := strings.CutPrefix(k, LabelMetaPrefix); ok {
			if cr.meta == nil {
				cr.meta = map[string]string{}
			}
			cr.meta[mk] = v
		}
	}
	return cr
}

// labelExpiry is the first expiry container c was made with (LabelExpires),
// or the zero time.
func labelExpiry(c Container) time.Time {
	s, err := strconv.ParseInt(c.Labels[LabelExpires], 10, 64)
	if err != nil || s <= 0 {
		return time.Time{}
	}
	return time.Unix(s, 0)
}

func (cr *creation) imageRef(def string) string {
	if cr == nil {
		return def
	}
	return cr.ref
}

// expiry is the expiry of a session of cr created at created; zero: none.
func (cr *creation) expiry(created time.Time) time.Time {
	if cr == nil || cr.ttl <= 0 {
		return time.Time{}
	}
	return created.Add(cr.ttl)
}

// limitsOf are the limits of a session of cr as session_metadata.json and
// the history show them.
func (m *Manager) limitsOf(cr *creation) map[string]string {
	l := m.limits()
	if cr != nil {
		l["memory_mb"] = strconv.Itoa(cr.memoryMB)
		l["cpus"] = strconv.FormatFloat(cr.cpus, 'f', -1, 64)
		l["image"] = cr.image
		if cr.ttl > 0 {
			l["ttl_s"] = strconv.FormatInt(int64((cr.ttl+time.Second-1)/time.Second), 10)
		}
	}
	return l
}
