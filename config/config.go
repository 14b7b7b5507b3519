package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/joho/godotenv"
)

// Storage says where a session's /session directory lives.
type Storage string

const (
	// StorageTMPFS keeps /session in RAM inside the container; it is gone
	// when the container is removed.
	StorageTMPFS Storage = "TMPFS"
	// StorageBind mounts SESSIONS_ROOT/<session-id> from the host, which
	// also receives the debugging files (session.log and friends).
	StorageBind Storage = "BIND"
)

func (s Storage) valid() bool { return s == StorageTMPFS || s == StorageBind }

// IdleAction says what the idle sweep does to a session unused for its
// idle timeout.
type IdleAction string

const (
	// IdleStop removes the session's container (BIND files stay): its
	// Python state is gone, and its key starts a fresh session.
	IdleStop IdleAction = "stop"
	// IdlePause freezes the container, memory (the Python state) kept,
	// and thaws it on the session's next call; removed after
	// IdlePausedTimeout paused.
	IdlePause IdleAction = "pause"
)

// Valid reports whether a is IdleStop or IdlePause.
func (a IdleAction) Valid() bool { return a == IdleStop || a == IdlePause }

// DatasetAccess says how sessions reach datasets.
type DatasetAccess string

const (
	// AccessNone gives sessions no datasets.
	AccessNone DatasetAccess = "NONE"
	// AccessLocalRO mounts DATASETS_HOST_RO read-only at /data.
	AccessLocalRO DatasetAccess = "LOCAL_RO"
	// AccessAPI stages datasets fetched by a caller-supplied function into
	// /session/data.
	AccessAPI DatasetAccess = "API"
	// AccessHybrid is AccessLocalRO and AccessAPI together.
	AccessHybrid DatasetAccess = "HYBRID"
)

// UsesLocal reports whether a mounts the host dataset directory
// (LOCAL_RO or HYBRID).
func (a DatasetAccess) UsesLocal() bool { return a == AccessLocalRO || a == AccessHybrid }

// UsesAPI reports whether a stages datasets through the fetch function
// (API or HYBRID).
func (a DatasetAccess) UsesAPI() bool { return a == AccessAPI || a == AccessHybrid }

func (a DatasetAccess) valid() bool {
	return a == AccessNone || a == AccessLocalRO || a == AccessAPI || a == AccessHybrid
}

// Config holds the operator settings of agentbox. Each field names the
// environment variable that sets it; example.env documents them all. The zero
// value is not useful: start from Default, Load or FromLookup.
//
// A Config is a plain value, safe to copy. Its String method lists it as
// environment lines with the token secret redacted, so it can be logged.
type Config struct {
	// SessionStorage is where /session lives: StorageTMPFS (RAM, sized by
	// TmpfsSizeMB) or StorageBind (SessionsRoot/<session-id> on the host).
	// SESSION_STORAGE, default TMPFS; any letter case is accepted.
	SessionStorage Storage
	// DatasetAccess selects the dataset sources.
	// DATASET_ACCESS, default API (LangGraph-Sandbox's default; without a
	// fetcher, DATASETS_API_URL or session.WithFetcher, it offers nothing
	// to select); any letter case is accepted.
	DatasetAccess DatasetAccess
	// SessionsRoot is the host directory holding one directory per session
	// in BIND mode. SESSIONS_ROOT, default ./sessions; absolute after
	// loading.
	SessionsRoot string
	// BlobstoreDir is the host directory of the content-addressed artifact
	// store. BLOBSTORE_DIR, default ./blobstore; absolute after loading.
	BlobstoreDir string
	// ArtifactsDB is the SQLite file indexing artifacts and executions.
	// ARTIFACTS_DB, default ./artifacts.db; absolute after loading.
	ArtifactsDB string
	// DatasetsHostRO is the host directory mounted read-only at /data.
	// DATASETS_HOST_RO, default empty; required, and must be an existing
	// directory, when DatasetAccess is LOCAL_RO or HYBRID. Absolute after
	// loading.
	DatasetsHostRO string
	// SandboxImage is the image every session container runs.
	// SANDBOX_IMAGE, default agentbox-sandbox:latest.
	SandboxImage string
	// ExtraPackages are Debian packages sandbox-setup adds to the sandbox
	// image (a derived image, tagged SandboxImage, built on the base
	// sandbox image). SANDBOX_EXTRA_PACKAGES, comma-separated Debian
	// package names, default none.
	ExtraPackages []string
	// TmpfsSizeMB is the size of /session in TMPFS mode, in MiB. Its files
	// are memory, counted apart from MemoryMB (the container's limit is
	// the sum of both, /tmp's 256 MiB and /dev/shm's 64).
	// TMPFS_SIZE_MB, default 1024, at least 16.
	TmpfsSizeMB int
	// SessionDiskMB is the size of /session in BIND mode, in MiB: each
	// session's workspace is a file system of its own (an ext4 image
	// beside its records, allocated in full when made and loop-mounted),
	// so the kernel refuses a write past it with ENOSPC. 0 means no
	// limit, chosen explicitly. A host that cannot enforce it (not root,
	// no loop devices) refuses to start BIND sessions rather than run
	// them unlimited. SESSION_DISK_MB, default 1024, 0 or at least 16.
	SessionDiskMB int
	// DiskReserveMB is the free space, in MiB, kept for the database: a
	// BIND session whose disk would leave less on the file system of
	// SessionsRoot is refused with ErrNoSpace, and an artifact that would
	// leave less on the blobstore's is not stored. DISK_RESERVE_MB,
	// default 1024, 0 for none.
	DiskReserveMB int

	// Namespace keeps apart the sessions of programs sharing an engine and
	// a database: containers are named <Namespace>_<session id> and
	// labelled io.agentbox.namespace, and the history, artifacts and
	// dataset statuses are kept per namespace. Programs that should see the
	// same sessions (a backend, agentbox, session-viewer) need the same
	// one; session.WithNamespace overrides it in code.
	// AGENTBOX_NAMESPACE, default DefaultNamespace (also when empty in
	// code): lowercase letters, digits and dashes, at most 32.
	Namespace string

	// MemoryMB is the memory limit of a session container's processes, in
	// MiB; files in memory count apart (see TmpfsSizeMB).
	// SANDBOX_MEMORY_MB, default 1024, at least 64.
	MemoryMB int
	// CPUs is the CPU limit of a session container, in CPUs (fractions
	// allowed). SANDBOX_CPUS, default 1, more than 0 and at most 64.
	CPUs float64
	// PidsLimit caps the processes and threads of a session container.
	// SANDBOX_PIDS_LIMIT, default 256, at least 16.
	PidsLimit int
	// Network is the Docker network of session containers: none, bridge,
	// host or a user network name. SANDBOX_NETWORK, default none.
	Network string
	// Runtime is the OCI runtime of session containers, such as runsc;
	// empty means the engine's default. SANDBOX_RUNTIME, default empty.
	Runtime string
	// User is the user code runs as: a uid, uid:gid or user name. Root is
	// refused unless AllowRoot is set. SANDBOX_USER, default 1000:1000.
	User string
	// AllowRoot permits User to be root (0, root or 0:gid).
	// SANDBOX_ALLOW_ROOT, default false.
	AllowRoot bool
	// ReadOnlyRoot makes the container's root filesystem read-only, with
	// writable tmpfs only where needed. SANDBOX_READ_ONLY_ROOT, default
	// true.
	ReadOnlyRoot bool
	// Seccomp selects the seccomp profile of session containers:
	// SeccompDefault (agentbox's own: the engine's default profile without
	// io_uring and other calls no cell needs, see
	// sandboximage.SeccompDenied), SeccompEngine (the engine's own
	// default), SeccompUnconfined (no filter at all; refused unless
	// AllowUnconfined is set), or the absolute path of a profile file in
	// Docker's JSON format. SeccompProfile gives what the engine is handed.
	// SANDBOX_SECCOMP, default "default"; any letter case is accepted for
	// the three names.
	Seccomp string
	// SeccompJSON is the content of the profile file Seccomp names, read
	// and checked when loading (so a later change to the file reaches a
	// program only when it loads its configuration again); empty when
	// Seccomp is not a path. Code that sets Seccomp to a path sets this too.
	SeccompJSON string
	// AllowUnconfined permits Seccomp to be SeccompUnconfined.
	// SANDBOX_ALLOW_UNCONFINED, default false.
	AllowUnconfined bool
	// EnvPassthrough names host environment variables copied into every
	// sandbox. SANDBOX_ENV_PASSTHROUGH, comma-separated, default none.
	EnvPassthrough []string

	// ExecTimeout bounds one execution; on expiry the code is interrupted.
	// EXEC_TIMEOUT_S, in whole seconds, default 120, at least 1.
	ExecTimeout time.Duration
	// InterruptGrace is how long interrupted code may take to stop before
	// the kernel is killed and restarted (losing state).
	// INTERRUPT_GRACE_S, in whole seconds, default 5, at least 1.
	InterruptGrace time.Duration
	// IdleTimeout is how long a session may stay unused before its
	// container is removed; 0 disables eviction. IDLE_TIMEOUT_S, in whole
	// seconds, default 2700 (45 minutes), at least 0.
	IdleTimeout time.Duration
	// IdleAction is what happens to a session idle for IdleTimeout:
	// IdleStop removes it, IdlePause freezes it until its next call.
	// IDLE_ACTION, stop or pause (any letter case), default stop; the
	// zero value is stop.
	IdleAction IdleAction
	// IdlePausedTimeout is how long a session the idle sweep paused stays
	// paused, unused, before it is removed; 0 keeps it until its time to
	// live. IDLE_PAUSED_TIMEOUT_S, in whole seconds, default 86400 (a
	// day), at least 0.
	IdlePausedTimeout time.Duration
	// PoolSize is the number of warm containers kept ready for new
	// sessions; 0 turns the pool off. POOL_SIZE, default 0, from 0 to 64.
	PoolSize int
	// MaxOutputBytes caps each output stream (stdout, stderr) of one
	// execution, in bytes. MAX_OUTPUT_BYTES, default 1048576, at least
	// 1024.
	MaxOutputBytes int

	// ArtifactServerAddr is the listen address of the artifact download
	// server, host:port. ARTIFACT_SERVER_ADDR, default :8000.
	ArtifactServerAddr string
	// ArtifactPublicURL is the base URL clients use to reach that server;
	// download links are built on it. ARTIFACT_PUBLIC_URL, default
	// http://localhost:8000; a trailing slash is trimmed when loading.
	ArtifactPublicURL string
	// TokenTTL is how long a download token stays valid.
	// ARTIFACT_TOKEN_TTL_S, in whole seconds, default 600, from 1 to 86400.
	TokenTTL time.Duration
	// TokenSecret signs download tokens; empty means the artifacts package
	// generates one on first use and keeps it. ARTIFACT_TOKEN_SECRET,
	// default empty, otherwise at least 32 characters.
	TokenSecret string
	// ArtifactMaxFileMB is the largest file ingested as an artifact, in
	// MiB; larger ones are skipped and reported. ARTIFACT_MAX_FILE_MB,
	// default 100, at least 1.
	ArtifactMaxFileMB int
	// ArtifactMaxFiles caps the files ingested after one execution; the
	// rest are skipped and reported. ARTIFACT_MAX_FILES, default 100, at
	// least 1.
	ArtifactMaxFiles int
	// ArtifactMaxSessionMB caps the bytes ingested over a session's life,
	// in MiB; 0 means no cap. ARTIFACT_MAX_SESSION_MB, default 1024.
	ArtifactMaxSessionMB int
	// ArtifactMove removes ingested files from /session/artifacts (as
	// LangGraph-Sandbox does) instead of leaving them for the code.
	// ARTIFACT_MOVE, default false.
	ArtifactMove bool
	// DatasetsAPIURL is the URL template of the built-in dataset fetcher
	// for API and HYBRID access: "{id}" is replaced by the dataset id,
	// path-escaped. Empty means the embedding program supplies a fetcher.
	// DATASETS_API_URL, default empty.
	DatasetsAPIURL string
	// DatasetsAPIToken is sent as a bearer token by the built-in fetcher.
	// DATASETS_API_TOKEN, default empty.
	DatasetsAPIToken string
	// DatasetsAPITimeout bounds one dataset fetch. DATASETS_API_TIMEOUT_S,
	// in whole seconds, default 300, at least 1.
	DatasetsAPITimeout time.Duration
	// DatasetMaxMB caps the size of one fetched dataset, in MiB.
	// DATASET_MAX_MB, default 1024, at least 1.
	DatasetMaxMB int
	// DatasetCacheScope says which sessions share a dataset fetched once:
	// CacheShared (every session of every namespace), CacheNamespace (the
	// sessions of one namespace) or CacheSession (one session key: the
	// fetcher is asked for, and can authorize, every key).
	// DATASET_CACHE_SCOPE, default session (also when empty in code); any
	// letter case is accepted. shared and namespace serve a dataset one
	// key's session selected to other keys' sessions without asking the
	// fetcher: agentbox serve refuses them when it has API keys (tenants).
	DatasetCacheScope string
	// ExportDir is the host directory exports are copied to.
	// EXPORT_DIR, default ./exports; absolute after loading.
	ExportDir string

	// ArtifactFigures also stores the matplotlib figures a result returns
	// as PNG artifacts, so a text-only agent gets a URL for its chart.
	// ARTIFACT_FIGURES, default true.
	ArtifactFigures bool

	// FilesMaxFileMB caps one file written into or read whole out of a
	// session through the files API (Manager.WriteFiles, ReadFile), in
	// MiB; a larger one is refused with session.ErrFileTooLarge.
	// FILES_MAX_FILE_MB, default 1024, from 1 to 1048576.
	FilesMaxFileMB int
	// FilesMaxCallMB caps the bytes of one WriteFiles call, all its files
	// together, in MiB. FILES_MAX_CALL_MB, default 2048, from 1 to
	// 1048576.
	FilesMaxCallMB int
	// Lifecycle and per-session options (see lifecycle.go).

	// SessionTTL is the time to live of a new session that asks for none:
	// past it the sweep removes the session, used or not; Renew extends
	// it. 0 means none. SESSION_TTL_S, in whole seconds, default 0.
	SessionTTL time.Duration
	// MaxSessionTTL is the longest time to live a session may ask for, at
	// creation or by a renewal; 0 means no maximum (then a session may
	// also have none). SESSION_MAX_TTL_S, in whole seconds, default 0.
	MaxSessionTTL time.Duration
	// MaxMemoryMB is the most memory a session may ask for at creation, in
	// MiB; a request above it is refused. 0 means the larger of MemoryMB
	// and DefaultMaxMemoryMB (2048, what OpenSandbox's SDK asks for by
	// default), and then a request the engine's host cannot back is given
	// less (see SessionMaxMemoryMB). SANDBOX_MAX_MEMORY_MB, default 0.
	MaxMemoryMB int
	// MaxCPUs is the most CPUs a session may ask for at creation; 0 means
	// SANDBOX_CPUS. SANDBOX_MAX_CPUS, default 0.
	MaxCPUs float64
	// SandboxImages are the images a session may ask for by name, besides
	// SandboxImage (whose name is "default"). SANDBOX_IMAGES,
	// comma-separated name=reference pairs, default none.
	SandboxImages map[string]string

	// agentbox serve (see serve.go).

	// ServeAddr is the listen address of agentbox serve, host:port.
	// SERVE_ADDR, default :8080.
	ServeAddr string
	// ServeAPIKeys are the API keys agentbox serve accepts, each a tenant.
	// SERVE_API_KEYS, comma-separated, default none; secret (String
	// redacts them).
	ServeAPIKeys []string
	// ServeAPIKeysFile names a file of more API keys, one per line (blank
	// lines and lines starting with # skipped), read when the server
	// starts. SERVE_API_KEYS_FILE, default empty; absolute after loading.
	ServeAPIKeysFile string
	// ServeAllowedHosts are more host names (the Host header, port aside)
	// a server without API keys answers, besides loopback names and the
	// host of its listen address: a name a proxy or /etc/hosts gives it.
	// Any other name is refused, so that a web page cannot reach a keyless
	// server through DNS rebinding. SERVE_ALLOWED_HOSTS, comma-separated,
	// default none.
	ServeAllowedHosts []string
	// ServeMaxConnsPerClient caps the connections one client address (an
	// IPv6 client's /64) may hold open at once; the next is answered 429 and closed. 0 means no
	// cap. SERVE_MAX_CONNS_PER_CLIENT, default 256.
	ServeMaxConnsPerClient int
	// ServeMetricsKey is the bearer token GET /metrics needs on a server
	// with API keys (the metrics count every tenant's work, so no tenant's
	// key opens them). Empty: a server with API keys does not serve
	// /metrics. SERVE_METRICS_KEY, default empty; secret.
	ServeMetricsKey string
	// SandboxTokenTTL is how long a per-sandbox execd access token lasts
	// (the lifecycle API's endpoint call issues a new one). Revoked keys
	// and recreated sandboxes refuse their tokens at once, whatever it
	// is. SANDBOX_TOKEN_TTL_S, in whole seconds, default 86400, from 60
	// to 604800.
	SandboxTokenTTL time.Duration

	// Tenant quotas (see quota.go): what the sessions of one tenant (an
	// API key of agentbox serve; a group of keys a library user names
	// with session.WithQuotaGroup) may hold at once. 0 means no limit.

	// TenantMaxSandboxes is the most sessions a tenant may have at once.
	// TENANT_MAX_SANDBOXES, default 16.
	TenantMaxSandboxes int
	// TenantMaxMemoryMB is the most memory, in MiB, a tenant's sessions
	// may have as their limits, summed. TENANT_MAX_MEMORY_MB, default
	// 16384.
	TenantMaxMemoryMB int
	// TenantMaxInflight is the most executions and shell commands a
	// tenant may have running or waiting for their session's turn at
	// once. TENANT_MAX_INFLIGHT, default 32.
	TenantMaxInflight int
	// TenantMaxArtifactMB is the most artifact bytes, in MiB, the index
	// may hold for a tenant's sessions; past it executions and commands
	// are refused.
	// TENANT_MAX_ARTIFACT_MB, default 10240.
	TenantMaxArtifactMB int

	// Notes says what loading made of LangGraph-Sandbox's settings that
	// agentbox names otherwise or does not need (see LangGraphVars), one
	// sentence each naming the variable; programs log them (NewManager
	// does, at Warn). Set by FromLookup; not a setting.
	Notes []string
}

// Values of Config.DatasetCacheScope (datasets.Scope has the same names).
const (
	CacheShared    = "shared"
	CacheNamespace = "namespace"
	CacheSession   = "session"
)

// DefaultNamespace is the default Config.Namespace.
const DefaultNamespace = "agentbox"

// Values of Config.Seccomp other than a profile file's path.
const (
	// SeccompDefault is agentbox's own profile (sandboximage.SeccompProfile).
	SeccompDefault = "default"
	// SeccompEngine is the engine's own default profile; Docker 20.10's
	// allows io_uring, for one.
	SeccompEngine = "engine"
	// SeccompUnconfined runs session containers with no seccomp filter,
	// the whole kernel interface open to the code; it needs
	// AllowUnconfined.
	SeccompUnconfined = "unconfined"
)

// maxSeccompFile bounds a profile file; Docker's default is about 20 KiB.
const maxSeccompFile = 1 << 20

// SeccompProfile returns the seccomp profile the engine is given for c:
// builtin (agentbox's profile, sandboximage.SeccompProfile, passed in so
// that this package depends on no other) for SeccompDefault, "" (the
// engine's default) for SeccompEngine, "unconfined" for SeccompUnconfined,
// and SeccompJSON for a profile file. A Seccomp left empty gets builtin,
// never less confinement.
func (c Config) SeccompProfile(builtin []byte) string {
	switch c.Seccomp {
	case SeccompEngine:
		return ""
	case SeccompUnconfined:
		return "unconfined"
	case SeccompDefault, "":
		return string(builtin)
	}
	if c.SeccompJSON == "" {
		return string(builtin) // Validate refuses this; never fall open
	}
	return c.SeccompJSON
}

// Default returns every setting at its default. Paths are relative, as
// written in example.env; FromLookup makes them absolute.
func Default() Config {
	return Config{
		SessionStorage: StorageTMPFS,
		DatasetAccess:  AccessAPI,
		SessionsRoot:   "./sessions",
		BlobstoreDir:   "./blobstore",
		ArtifactsDB:    "./artifacts.db",
		SandboxImage:   "agentbox-sandbox:latest",
		TmpfsSizeMB:    1024,
		SessionDiskMB:  1024,
		DiskReserveMB:  1024,
		Namespace:      DefaultNamespace,

		MemoryMB:     1024,
		CPUs:         1,
		PidsLimit:    256,
		Network:      "none",
		User:         "1000:1000",
		ReadOnlyRoot: true,
		Seccomp:      SeccompDefault,

		ExecTimeout:    120 * time.Second,
		InterruptGrace: 5 * time.Second,
		IdleTimeout:    2700 * time.Second,
		MaxOutputBytes: 1 << 20,
		// What the idle timeout does (IDLE_ACTION, IDLE_PAUSED_TIMEOUT_S).
		IdleAction:        IdleStop,
		IdlePausedTimeout: 86400 * time.Second,

		ArtifactServerAddr:     ":8000",
		ArtifactPublicURL:      "http://localhost:8000",
		TokenTTL:               600 * time.Second,
		ArtifactMaxFileMB:      100,
		ArtifactMaxFiles:       100,
		ArtifactMaxSessionMB:   1024,
		ArtifactFigures:        true,
		DatasetsAPITimeout:     300 * time.Second,
		DatasetMaxMB:           1024,
		DatasetCacheScope:      CacheSession,
		ExportDir:              "./exports",
		FilesMaxFileMB:         1024,
		FilesMaxCallMB:         2048,
		ServeAddr:              ":8080",
		ServeMaxConnsPerClient: 256,
		SandboxTokenTTL:        86400 * time.Second,
		TenantMaxSandboxes:     DefaultTenantMaxSandboxes,
		TenantMaxMemoryMB:      DefaultTenantMaxMemoryMB,
		TenantMaxInflight:      DefaultTenantMaxInflight,
		TenantMaxArtifactMB:    DefaultTenantMaxArtifactMB,
	}
}

// Load reads .env and LangGraphEnvFile (sandbox.env, where
// LangGraph-Sandbox keeps its settings) in the current directory, then the
// process environment on top: a variable set in the environment wins over
// both files, and one in .env over sandbox.env. Either file may be missing.
func Load() (Config, error) { return loadFiles(".env", LangGraphEnvFile) }

// LoadFile reads the dotenv file at path, then the process environment, and
// returns the resulting Config. A variable set in the environment wins over
// the file, even when set to an empty string (which, as everywhere, means the
// default). A missing file is not an error, since a .env file is optional; a
// file that cannot be read or parsed is, reported as a *FileError naming it.
//
// The process environment is only read, never changed, so loading has no
// effect on other code or on child processes.
func LoadFile(path string) (Config, error) { return loadFiles(path) }

// loadFiles reads the dotenv files at paths, the first winning, under the
// process environment.
func loadFiles(paths ...string) (Config, error) {
	var files []map[string]string
	for _, path := range paths {
		file, err := godotenv.Read(path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return Config{}, fileError(path, err)
			}
			continue
		}
		files = append(files, file)
	}
	return FromLookup(func(name string) (string, bool) {
		if v, ok := os.LookupEnv(name); ok {
			return v, true
		}
		for _, file := range files {
			if v, ok := file[name]; ok {
				return v, true
			}
		}
		return "", false
	})
}

// FromLookup builds a Config from lookup, which reports a variable's value and
// whether it is set (os.LookupEnv has that shape; a nil lookup sets nothing).
// Values are trimmed; an unset or blank variable takes its default. Relative
// paths become absolute against the current directory. The result is then
// checked with Validate.
//
// Every bad variable is reported, joined with errors.Join, so an operator
// fixes them all in one go; each is a *VarError matching ErrInvalid.
func FromLookup(lookup func(string) (string, bool)) (Config, error) {
	c := Default()
	specs := specs()
	given := make(map[string]string) // trimmed values as set, for messages
	found := make(map[string][]error)
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	lg := newLangGraphReader(lookup)
	lookup = lg.wrap()
	for _, s := range specs {
		v, ok := lookup(s.name)
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			continue
		}
		given[s.name] = v
		if !s.set(&c, v) {
			found[s.name] = append(found[s.name], lg.rename(s.varError(v, s.want)))
		}
	}

	var errs []error
	for _, p := range []struct {
		name string
		path *string
	}{
		{"SESSIONS_ROOT", &c.SessionsRoot},
		{"BLOBSTORE_DIR", &c.BlobstoreDir},
		{"ARTIFACTS_DB", &c.ArtifactsDB},
		{"DATASETS_HOST_RO", &c.DatasetsHostRO},
		{"EXPORT_DIR", &c.ExportDir},
		{"SERVE_API_KEYS_FILE", &c.ServeAPIKeysFile},
	} {
		if *p.path == "" {
			continue
		}
		abs, err := filepath.Abs(*p.path)
		if err != nil {
			errs = append(errs, fmt.Errorf("resolve %s: %w", p.name, err))
			continue
		}
		*p.path = abs
	}

	for _, e := range c.problems() {
		if len(found[e.Name]) > 0 {
			continue // already reported the value as unparsable
		}
		// Show what the operator wrote, not our normalised form of it.
		if v, ok := given[e.Name]; ok {
			e.Value = v
			if e.Secret {
				e.Value = redacted(v)
			}
		}
		found[e.Name] = append(found[e.Name], lg.rename(e))
	}

	var all []error
	for _, s := range specs {
		all = append(all, found[s.name]...)
		for _, e := range lg.errs[s.name] {
			all = append(all, e)
		}
	}
	all = append(all, errs...)
	if len(all) > 0 {
		return Config{}, errors.Join(all...)
	}
	c.Notes = lg.notes
	return c, nil
}

// Validate reports every setting of c that is out of range or malformed, as
// *VarError values joined with errors.Join, or nil. It checks the same rules
// as loading, for a Config built or changed in code. Durations need not be
// whole seconds here. The only I/O it does is to stat DatasetsHostRO when
// DatasetAccess uses local datasets, and to read the profile file Seccomp
// names when SeccompJSON is empty, to say what is wrong with it.
func (c Config) Validate() error {
	var errs []error
	for _, e := range c.problems() {
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// String lists c as NAME=value lines in the order of Vars, the form a .env
// file takes. The token secret is redacted.
func (c Config) String() string {
	var b strings.Builder
	for _, s := range specs() {
		v := s.get(c)
		if s.secret && v != "" {
			v = redacted(v)
		}
		b.WriteString(s.name + "=" + v + "\n")
	}
	return b.String()
}

// problems checks c against every variable's rule, in the order of Vars.
func (c Config) problems() []*VarError {
	var out []*VarError
	for _, s := range specs() {
		if s.check == nil {
			continue
		}
		if want := s.check(c); want != "" {
			out = append(out, s.varError(s.get(c), want))
		}
	}
	return out
}

// Var describes one environment variable the package reads.
type Var struct {
	// Name is the variable, such as "SESSION_STORAGE".
	Name string
	// Default is the default value as it would be written in the
	// environment; empty when the variable is unset by default.
	Default string
	// Help says in one line what the variable sets.
	Help string
}

// Vars lists every variable the package reads, in the order of example.env.
func Vars() []Var {
	specs := specs()
	vars := make([]Var, len(specs))
	for i, s := range specs {
		vars[i] = Var{Name: s.name, Default: s.def, Help: s.help}
	}
	return vars
}

// spec is one variable: its documentation and how it maps onto Config. It is
// the single list both the loader and the example.env test read, so a
// variable cannot be added without being documented.
type spec struct {
	name, def, help string
	// want describes a good value, for a value that does not parse.
	want   string
	secret bool
	// set stores a trimmed, non-empty value into c, reporting false when it
	// does not parse (c is then left unchanged).
	set func(c *Config, v string) bool
	// get spells c's field the way the variable would.
	get func(c Config) string
	// check returns "" when c's field is acceptable, else what is wanted.
	check func(c Config) string
}

func (s spec) varError(value, want string) *VarError {
	if s.secret {
		value = redacted(value)
	}
	return &VarError{Name: s.name, Value: value, Want: want, Secret: s.secret}
}

const (
	wantBool       = "true or false"
	wantStorage    = "TMPFS or BIND"
	wantIdleAction = "stop or pause"
	wantAccess     = "NONE, LOCAL_RO, API or HYBRID"
	wantCacheScope = "shared, namespace or session"
	wantCPUs       = "a number > 0 and ≤ 64"
	wantImage      = `an image reference such as "agentbox-sandbox:latest" (lowercase repository, no spaces)`
	wantNetwork    = "none, bridge, host or a network name matching " + namePattern
	wantRuntime    = "an OCI runtime name such as runsc, matching " + namePattern
	wantUser       = "a uid, uid:gid or user name"
	wantNonRoot    = "a non-root user, or SANDBOX_ALLOW_ROOT=true to run as root"
	wantSeccomp    = "default, engine, unconfined (with SANDBOX_ALLOW_UNCONFINED=true) or the absolute path of a JSON seccomp profile"
	wantConfined   = "default, engine or a profile file; unconfined (no seccomp filter at all) needs SANDBOX_ALLOW_UNCONFINED=true"
	wantEnvList    = "comma-separated variable names matching " + envNamePattern
	wantPackages   = "comma-separated Debian package names matching " + debPackagePattern + ", such as python3-statsmodels,python3-seaborn"
	wantAddr       = `host:port with a port from 0 to 65535, such as ":8000"`
	wantURL        = "an absolute http or https URL with a host and no query, fragment or user info"
	wantTemplate   = "an http or https URL containing {id}, such as https://data.example/datasets/{id}"
	wantSecret     = "at least 32 characters"
	wantNamespace  = "lowercase letters, digits and dashes, at most 32, starting with a letter or digit"

	namePattern    = `^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`
	envNamePattern = `^[A-Za-z_][A-Za-z0-9_]*$`
	// debPackagePattern is Debian's package-name grammar.
	debPackagePattern = `^[a-z0-9][a-z0-9+.-]+$`

	// maxSeconds keeps a duration in seconds from overflowing time.Duration.
	maxSeconds = math.MaxInt64 / int64(time.Second)
)

var (
	// imageRE is a simplified Docker reference grammar: an optional registry
	// (with a dot, a port or "localhost"), lowercase path components, an
	// optional tag and an optional sha256 digest.
	imageRE = regexp.MustCompile(`^` +
		`(?:(?:localhost|[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)+)(?::[0-9]+)?/|[a-zA-Z0-9-]+:[0-9]+/)?` +
		`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
		`(?::[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?` +
		`(?:@sha256:[a-f0-9]{64})?$`)
	nameRE       = regexp.MustCompile(namePattern)
	envNameRE    = regexp.MustCompile(envNamePattern)
	debPackageRE = regexp.MustCompile(debPackagePattern)
	// userRE accepts what docker run --user does, minus oddities: a uid or
	// a name, optionally followed by :gid or :group.
	userRE = regexp.MustCompile(`^([0-9]+|[a-z_][a-z0-9_.-]*)(?::([0-9]+|[a-z_][a-z0-9_.-]*))?$`)
	// namespaceRE is what container names and labels take (and
	// session.WithNamespace checks).
	namespaceRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
)

// specs returns the variables in the order of example.env. It builds a fresh
// list each call so there is no package state to guard.
func specs() []spec {
	return append(append(append(baseSpecs(), lifecycleSpecs()...), serveSpecs()...), quotaSpecs()...)
}

func baseSpecs() []spec {
	return []spec{
		// LangGraph-Sandbox's names, with its meanings.
		{
			name: "SESSION_STORAGE", def: "TMPFS", want: wantStorage,
			help: "where /session lives: TMPFS (RAM) or BIND (SESSIONS_ROOT/<session-id> on the host)",
			set: func(c *Config, v string) bool {
				s := Storage(strings.ToUpper(v))
				if !s.valid() {
					return false
				}
				c.SessionStorage = s
				return true
			},
			get: func(c Config) string { return string(c.SessionStorage) },
			check: func(c Config) string {
				if !c.SessionStorage.valid() {
					return wantStorage
				}
				return ""
			},
		},
		{
			name: "DATASET_ACCESS", def: "API", want: wantAccess,
			help: "dataset sources: NONE, LOCAL_RO (DATASETS_HOST_RO at /data), API (fetched into /session/data) or HYBRID",
			set: func(c *Config, v string) bool {
				a := DatasetAccess(strings.ToUpper(v))
				if !a.valid() {
					return false
				}
				c.DatasetAccess = a
				return true
			},
			get: func(c Config) string { return string(c.DatasetAccess) },
			check: func(c Config) string {
				if !c.DatasetAccess.valid() {
					return wantAccess
				}
				return ""
			},
		},
		pathSpec("SESSIONS_ROOT", "./sessions", "host directory of per-session directories in BIND mode",
			func(c *Config) *string { return &c.SessionsRoot }),
		pathSpec("BLOBSTORE_DIR", "./blobstore", "host directory of the content-addressed artifact store",
			func(c *Config) *string { return &c.BlobstoreDir }),
		pathSpec("ARTIFACTS_DB", "./artifacts.db", "SQLite file indexing artifacts and executions",
			func(c *Config) *string { return &c.ArtifactsDB }),
		{
			name: "DATASETS_HOST_RO", def: "",
			help: "host directory mounted read-only at /data; required for LOCAL_RO and HYBRID",
			set:  func(c *Config, v string) bool { c.DatasetsHostRO = v; return true },
			get:  func(c Config) string { return c.DatasetsHostRO },
			check: func(c Config) string {
				if !c.DatasetAccess.UsesLocal() {
					return ""
				}
				if c.DatasetsHostRO == "" {
					if c.DatasetAccess == AccessHybrid {
						return "a directory, required when DATASET_ACCESS=HYBRID (LangGraph-Sandbox's " + hybridLocalPath + " is read as it)"
					}
					return "a directory, required when DATASET_ACCESS=" + string(c.DatasetAccess)
				}
				return checkDir(c.DatasetsHostRO)
			},
		},
		{
			name: "SANDBOX_IMAGE", def: "agentbox-sandbox:latest",
			help: "image every session container runs",
			set:  func(c *Config, v string) bool { c.SandboxImage = v; return true },
			get:  func(c Config) string { return c.SandboxImage },
			check: func(c Config) string {
				if !imageRE.MatchString(c.SandboxImage) {
					return wantImage
				}
				return ""
			},
		},
		{
			name: "SANDBOX_EXTRA_PACKAGES", def: "",
			help: "comma-separated Debian packages sandbox-setup adds to the sandbox image, such as python3-statsmodels,python3-seaborn",
			set: func(c *Config, v string) bool {
				c.ExtraPackages = splitList(v)
				return true
			},
			get: func(c Config) string { return strings.Join(c.ExtraPackages, ",") },
			check: func(c Config) string {
				for _, n := range c.ExtraPackages {
					if !debPackageRE.MatchString(n) {
						return wantPackages + " (" + strconv.Quote(n) + " does not)"
					}
				}
				return ""
			},
		},
		intSpec("TMPFS_SIZE_MB", "size of /session in TMPFS mode, in MiB", 1024, 16, math.MaxInt,
			func(c *Config) *int { return &c.TmpfsSizeMB }),
		diskSpec(),
		intSpec("DISK_RESERVE_MB", "free space, in MiB, kept for the database: BIND sessions and artifacts that would leave less on their file system are refused", 1024, 0, math.MaxInt32,
			func(c *Config) *int { return &c.DiskReserveMB }),

		// Which sessions a program sees.
		{
			name: "AGENTBOX_NAMESPACE", def: DefaultNamespace, want: wantNamespace,
			help: "namespace of the sessions: containers are named <namespace>_<session id>; programs sharing sessions need the same",
			set:  func(c *Config, v string) bool { c.Namespace = v; return true },
			get:  func(c Config) string { return c.Namespace },
			check: func(c Config) string {
				if c.Namespace != "" && !namespaceRE.MatchString(c.Namespace) { // "": a Config made before the field
					return wantNamespace
				}
				return ""
			},
		},

		// Sandbox limits and security.
		intSpec("SANDBOX_MEMORY_MB", "memory limit per session container, in MiB", 1024, 64, math.MaxInt,
			func(c *Config) *int { return &c.MemoryMB }),
		{
			name: "SANDBOX_CPUS", def: "1", want: wantCPUs,
			help: "CPU limit per session container, in CPUs (fractions allowed)",
			set: func(c *Config, v string) bool {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || !cpusOK(f) {
					return false
				}
				c.CPUs = f
				return true
			},
			get: func(c Config) string { return strconv.FormatFloat(c.CPUs, 'f', -1, 64) },
			check: func(c Config) string {
				if !cpusOK(c.CPUs) {
					return wantCPUs
				}
				return ""
			},
		},
		intSpec("SANDBOX_PIDS_LIMIT", "maximum processes and threads per session container", 256, 16, math.MaxInt,
			func(c *Config) *int { return &c.PidsLimit }),
		{
			name: "SANDBOX_NETWORK", def: "none",
			help: "Docker network of session containers: none, bridge, host or a user network name",
			set:  func(c *Config, v string) bool { c.Network = v; return true },
			get:  func(c Config) string { return c.Network },
			check: func(c Config) string {
				if !nameRE.MatchString(c.Network) {
					return wantNetwork
				}
				return ""
			},
		},
		{
			name: "SANDBOX_RUNTIME", def: "",
			help: "OCI runtime of session containers, such as runsc; empty means the engine's default",
			set:  func(c *Config, v string) bool { c.Runtime = v; return true },
			get:  func(c Config) string { return c.Runtime },
			check: func(c Config) string {
				if c.Runtime != "" && !nameRE.MatchString(c.Runtime) {
					return wantRuntime
				}
				return ""
			},
		},
		{
			name: "SANDBOX_USER", def: "1000:1000",
			help: "user code runs as: uid, uid:gid or user name; root needs SANDBOX_ALLOW_ROOT=true",
			set:  func(c *Config, v string) bool { c.User = v; return true },
			get:  func(c Config) string { return c.User },
			check: func(c Config) string {
				m := userRE.FindStringSubmatch(c.User)
				if m == nil {
					return wantUser
				}
				if isRoot(m[1]) && !c.AllowRoot {
					return wantNonRoot
				}
				return ""
			},
		},
		boolSpec("SANDBOX_ALLOW_ROOT", "allow SANDBOX_USER to be root", false,
			func(c *Config) *bool { return &c.AllowRoot }),
		boolSpec("SANDBOX_READ_ONLY_ROOT", "make the container's root filesystem read-only", true,
			func(c *Config) *bool { return &c.ReadOnlyRoot }),
		{
			name: "SANDBOX_SECCOMP", def: SeccompDefault, want: wantSeccomp,
			help: "seccomp profile of session containers: default (agentbox's), engine, unconfined or a JSON profile file",
			set: func(c *Config, v string) bool {
				switch lv := strings.ToLower(v); lv {
				case SeccompDefault, SeccompEngine, SeccompUnconfined:
					c.Seccomp, c.SeccompJSON = lv, ""
					return true
				}
				if !filepath.IsAbs(v) {
					return false
				}
				// A file that cannot be read or is no profile is
				// reported by check, which reads it again for the reason.
				c.Seccomp, c.SeccompJSON = v, ""
				if data, err := readSeccomp(v); err == nil {
					c.SeccompJSON = string(data)
				}
				return true
			},
			get:   func(c Config) string { return c.Seccomp },
			check: checkSeccomp,
		},
		boolSpec("SANDBOX_ALLOW_UNCONFINED", "allow SANDBOX_SECCOMP=unconfined", false,
			func(c *Config) *bool { return &c.AllowUnconfined }),
		{
			name: "SANDBOX_ENV_PASSTHROUGH", def: "",
			help: "comma-separated host environment variables copied into every sandbox",
			set: func(c *Config, v string) bool {
				c.EnvPassthrough = splitList(v)
				return true
			},
			get: func(c Config) string { return strings.Join(c.EnvPassthrough, ",") },
			check: func(c Config) string {
				for _, n := range c.EnvPassthrough {
					if !envNameRE.MatchString(n) {
						return wantEnvList + " (" + strconv.Quote(n) + " does not)"
					}
				}
				return ""
			},
		},

		// Timeouts and pool.
		durationSpec("EXEC_TIMEOUT_S", "longest one execution may run before it is interrupted, in seconds",
			120, 1, maxSeconds, "", func(c *Config) *time.Duration { return &c.ExecTimeout }),
		durationSpec("INTERRUPT_GRACE_S", "time interrupted code gets to stop before the kernel is restarted, in seconds",
			5, 1, maxSeconds, "", func(c *Config) *time.Duration { return &c.InterruptGrace }),
		durationSpec("IDLE_TIMEOUT_S", "idle time after which a session's container is removed, in seconds; 0 disables",
			2700, 0, maxSeconds, " (0 disables eviction)", func(c *Config) *time.Duration { return &c.IdleTimeout }),
		{
			name: "IDLE_ACTION", def: string(IdleStop), want: wantIdleAction,
			help: "what the idle timeout does to a session: stop (remove it) or pause (freeze it, resumed on its next call)",
			set: func(c *Config, v string) bool {
				a := IdleAction(strings.ToLower(v))
				if !a.Valid() {
					return false
				}
				c.IdleAction = a
				return true
			},
			get: func(c Config) string { return string(c.IdleAction) },
			check: func(c Config) string {
				if c.IdleAction != "" && !c.IdleAction.Valid() { // "": stop, as before the setting
					return wantIdleAction
				}
				return ""
			},
		},
		durationSpec("IDLE_PAUSED_TIMEOUT_S", "time a session paused by IDLE_ACTION=pause stays paused before it is removed, in seconds; 0 keeps it until its time to live",
			86400, 0, maxSeconds, " (0 keeps paused idle sessions until their time to live)", func(c *Config) *time.Duration { return &c.IdlePausedTimeout }),
		intSpec("POOL_SIZE", "warm containers kept ready for new sessions; 0 turns the pool off", 0, 0, 64,
			func(c *Config) *int { return &c.PoolSize }),
		intSpec("MAX_OUTPUT_BYTES", "cap on each output stream of one execution, in bytes", 1<<20, 1024, math.MaxInt,
			func(c *Config) *int { return &c.MaxOutputBytes }),

		// Artifacts.
		{
			name: "ARTIFACT_SERVER_ADDR", def: ":8000",
			help: "listen address of the artifact download server",
			set:  func(c *Config, v string) bool { c.ArtifactServerAddr = v; return true },
			get:  func(c Config) string { return c.ArtifactServerAddr },
			check: func(c Config) string {
				_, port, err := net.SplitHostPort(c.ArtifactServerAddr)
				if err != nil {
					return wantAddr
				}
				if _, err := strconv.ParseUint(port, 10, 16); err != nil {
					return wantAddr
				}
				return ""
			},
		},
		{
			name: "ARTIFACT_PUBLIC_URL", def: "http://localhost:8000",
			help: "base URL clients use to reach the artifact server; download links are built on it",
			set: func(c *Config, v string) bool {
				c.ArtifactPublicURL = strings.TrimRight(v, "/")
				return true
			},
			get:   func(c Config) string { return c.ArtifactPublicURL },
			check: func(c Config) string { return checkURL(c.ArtifactPublicURL) },
		},
		durationSpec("ARTIFACT_TOKEN_TTL_S", "lifetime of a download token, in seconds",
			600, 1, 86400, "", func(c *Config) *time.Duration { return &c.TokenTTL }),
		{
			name: "ARTIFACT_TOKEN_SECRET", def: "", secret: true,
			help: "key signing download tokens, at least 32 characters; empty means generated on first use and kept",
			set:  func(c *Config, v string) bool { c.TokenSecret = v; return true },
			get:  func(c Config) string { return c.TokenSecret },
			check: func(c Config) string {
				if c.TokenSecret != "" && len([]rune(c.TokenSecret)) < 32 {
					return wantSecret
				}
				return ""
			},
		},
		intSpec("ARTIFACT_MAX_FILE_MB", "largest file ingested as an artifact, in MiB; larger ones are skipped and reported", 100, 1, 1<<20,
			func(c *Config) *int { return &c.ArtifactMaxFileMB }),
		intSpec("ARTIFACT_MAX_FILES", "most files ingested after one execution; the rest are skipped and reported", 100, 1, 1<<20,
			func(c *Config) *int { return &c.ArtifactMaxFiles }),
		intSpec("ARTIFACT_MAX_SESSION_MB", "most artifact bytes ingested over a session's life, in MiB; 0 means no cap", 1024, 0, 1<<30,
			func(c *Config) *int { return &c.ArtifactMaxSessionMB }),
		boolSpec("ARTIFACT_MOVE", "remove ingested files from /session/artifacts instead of leaving them", false,
			func(c *Config) *bool { return &c.ArtifactMove }),
		boolSpec("ARTIFACT_FIGURES", "also store the matplotlib figures results return as PNG artifacts", true,
			func(c *Config) *bool { return &c.ArtifactFigures }),

		// Datasets fetched by id (API and HYBRID), and exports.
		{
			name: "DATASETS_API_URL", def: "",
			help: "URL template of the built-in dataset fetcher, {id} replaced by the dataset id; empty: the program supplies a fetcher",
			set:  func(c *Config, v string) bool { c.DatasetsAPIURL = v; return true },
			get:  func(c Config) string { return c.DatasetsAPIURL },
			check: func(c Config) string {
				if c.DatasetsAPIURL == "" {
					return ""
				}
				if !strings.Contains(c.DatasetsAPIURL, "{id}") {
					return wantTemplate
				}
				p, err := url.Parse(strings.ReplaceAll(c.DatasetsAPIURL, "{id}", "x"))
				if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
					return wantTemplate
				}
				return ""
			},
		},
		{
			name: "DATASETS_API_TOKEN", def: "", secret: true,
			help: "bearer token the built-in dataset fetcher sends",
			set:  func(c *Config, v string) bool { c.DatasetsAPIToken = v; return true },
			get:  func(c Config) string { return c.DatasetsAPIToken },
		},
		durationSpec("DATASETS_API_TIMEOUT_S", "time one dataset fetch may take, in seconds",
			300, 1, maxSeconds, "", func(c *Config) *time.Duration { return &c.DatasetsAPITimeout }),
		intSpec("DATASET_MAX_MB", "largest dataset fetched, in MiB", 1024, 1, 1<<20,
			func(c *Config) *int { return &c.DatasetMaxMB }),
		{
			name: "DATASET_CACHE_SCOPE", def: CacheSession, want: wantCacheScope,
			help: "which sessions share a dataset fetched once: shared (all), namespace, or session (the fetcher sees, and can authorize, every key)",
			set: func(c *Config, v string) bool {
				v = strings.ToLower(v)
				if v != CacheShared && v != CacheNamespace && v != CacheSession {
					return false
				}
				c.DatasetCacheScope = v
				return true
			},
			get: func(c Config) string { return c.DatasetCacheScope },
			check: func(c Config) string {
				switch c.DatasetCacheScope {
				case "", CacheShared, CacheNamespace, CacheSession: // "": a Config made before the field
					return ""
				}
				return wantCacheScope
			},
		},
		pathSpec("EXPORT_DIR", "./exports", "host directory files exported from sessions are copied to",
			func(c *Config) *string { return &c.ExportDir }),

		// The files API (write, read, list files in a session).
		intSpec("FILES_MAX_FILE_MB", "largest file written into or read whole out of a session by the files API, in MiB", 1024, 1, 1<<20,
			func(c *Config) *int { return &c.FilesMaxFileMB }),
		intSpec("FILES_MAX_CALL_MB", "most bytes one write of files into a session carries, all files together, in MiB", 2048, 1, 1<<20,
			func(c *Config) *int { return &c.FilesMaxCallMB }),
	}
}

// pathSpec is a path that must not be empty. Relative paths are resolved by
// FromLookup, not here, so Default and Validate need no working directory.
func pathSpec(name, def, help string, field func(*Config) *string) spec {
	return spec{
		name: name, def: def, help: help,
		set: func(c *Config, v string) bool { *field(c) = v; return true },
		get: func(c Config) string { return *field(&c) },
		check: func(c Config) string {
			if *field(&c) == "" {
				return "a path"
			}
			return ""
		},
	}
}

// intSpec is an integer in [lo, hi]; hi of math.MaxInt means no upper bound.
func intSpec(name, help string, def, lo, hi int, field func(*Config) *int) spec {
	return intSpecOf(name, help, def, rangeWant("an integer", int64(lo), int64(hi), math.MaxInt),
		func(n int) bool { return n >= lo && n <= hi }, field)
}

// intSpecOf is an integer that ok accepts; want says which.
func intSpecOf(name, help string, def int, want string, ok func(int) bool, field func(*Config) *int) spec {
	return spec{
		name: name, def: strconv.Itoa(def), help: help, want: want,
		set: func(c *Config, v string) bool {
			n, err := strconv.Atoi(v)
			if err != nil || !ok(n) {
				return false
			}
			*field(c) = n
			return true
		},
		get: func(c Config) string { return strconv.Itoa(*field(&c)) },
		check: func(c Config) string {
			if !ok(*field(&c)) {
				return want
			}
			return ""
		},
	}
}

// diskSpec is SESSION_DISK_MB: 0 (no limit) or a size a file system with a
// journal fits in.
func diskSpec() spec {
	return intSpecOf("SESSION_DISK_MB",
		"size of /session in BIND mode, in MiB, enforced by the kernel (a loop-mounted file system per session); 0 for no limit",
		1024, "0 (no limit) or an integer from 16 to 1048576",
		func(n int) bool { return n == 0 || n >= 16 && n <= 1<<20 },
		func(c *Config) *int { return &c.SessionDiskMB })
}

// durationSpec is a whole number of seconds in [lo, hi]; hi of maxSeconds
// means no upper bound. note is appended to the wanted range.
func durationSpec(name, help string, def, lo, hi int64, note string, field func(*Config) *time.Duration) spec {
	want := rangeWant("an integer", lo, hi, maxSeconds) + note
	return spec{
		name: name, def: strconv.FormatInt(def, 10), help: help, want: want,
		set: func(c *Config, v string) bool {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < lo || n > hi {
				return false
			}
			*field(c) = time.Duration(n) * time.Second
			return true
		},
		get: func(c Config) string {
			return strconv.FormatFloat(field(&c).Seconds(), 'f', -1, 64)
		},
		check: func(c Config) string {
			// Code may set sub-second durations (tests do); only the
			// environment is limited to whole seconds.
			d := *field(&c)
			if d < time.Duration(lo)*time.Second || d > time.Duration(hi)*time.Second {
				return want
			}
			return ""
		},
	}
}

// boolSpec is a boolean that accepts the usual spellings.
func boolSpec(name, help string, def bool, field func(*Config) *bool) spec {
	return spec{
		name: name, def: strconv.FormatBool(def), help: help, want: wantBool,
		set: func(c *Config, v string) bool {
			b, ok := parseBool(v)
			if ok {
				*field(c) = b
			}
			return ok
		},
		get: func(c Config) string { return strconv.FormatBool(*field(&c)) },
	}
}

func rangeWant(what string, lo, hi, unbounded int64) string {
	if hi == unbounded {
		return fmt.Sprintf("%s ≥ %d", what, lo)
	}
	return fmt.Sprintf("%s from %d to %d", what, lo, hi)
}

func parseBool(v string) (b, ok bool) {
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on":
		return true, true
	case "false", "0", "no", "off":
		return false, true
	}
	return false, false
}

// cpusOK is written so that NaN fails it.
func cpusOK(f float64) bool { return f > 0 && f <= 64 }

// isRoot reports whether the user part of SANDBOX_USER means uid 0; "000"
// is root too.
func isRoot(user string) bool {
	return user == "root" || strings.Trim(user, "0") == ""
}

// splitList splits a comma-separated list, trimming items and dropping empty
// ones so that a trailing comma is harmless.
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// checkDir returns "" when dir is an existing directory. The message shows
// the absolute path so a relative value's meaning is plain.
func checkDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	info, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "an existing directory (" + abs + " does not exist)"
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "an existing directory (" + abs + ": " + err.Error() + ")"
	case !info.IsDir():
		return "an existing directory (" + abs + " is not a directory)"
	}
	return ""
}

// checkSeccomp returns "" when c.Seccomp names a profile that can be used.
func checkSeccomp(c Config) string {
	switch c.Seccomp {
	case SeccompDefault, SeccompEngine:
		return ""
	case SeccompUnconfined:
		if !c.AllowUnconfined {
			return wantConfined
		}
		return ""
	}
	if !filepath.IsAbs(c.Seccomp) {
		return wantSeccomp
	}
	if c.SeccompJSON == "" {
		if _, err := readSeccomp(c.Seccomp); err != nil {
			return wantSeccomp + " (" + err.Error() + ")"
		}
		return wantSeccomp + " (its content is not loaded: set SeccompJSON too, or load the configuration with FromLookup)"
	}
	if err := parseSeccomp([]byte(c.SeccompJSON)); err != nil {
		return wantSeccomp + " (" + c.Seccomp + ": " + err.Error() + ")"
	}
	return ""
}

// readSeccomp reads and checks a profile file. Only a regular file is
// opened, so a FIFO or a device cannot stall loading; its errors name the
// file.
func readSeccomp(path string) ([]byte, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errors.New(path + " does not exist")
	case err != nil:
		return nil, errors.New(path + ": " + pathErr(err))
	case !info.Mode().IsRegular():
		return nil, errors.New(path + " is not a regular file")
	case info.Size() > maxSeccompFile:
		return nil, errors.New(path + ": larger than 1 MiB")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.New(path + ": " + pathErr(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSeccompFile+1))
	if err != nil {
		return nil, errors.New(path + ": " + pathErr(err))
	}
	if len(data) > maxSeccompFile {
		return nil, errors.New(path + ": larger than 1 MiB")
	}
	if err := parseSeccomp(data); err != nil {
		return nil, errors.New(path + ": " + err.Error())
	}
	return data, nil
}

// parseSeccomp checks that data is a profile in Docker's format, as far as
// can be told without the engine: a JSON object with a defaultAction.
func parseSeccomp(data []byte) error {
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		return fmt.Errorf("not JSON: %w", err)
	}
	var p struct {
		DefaultAction string `json:"defaultAction"`
	}
	if err := json.Unmarshal(data, &p); err != nil || p.DefaultAction == "" {
		return errors.New("not a seccomp profile: want a JSON object with a defaultAction")
	}
	return nil
}

// pathErr is err without the path an *fs.PathError repeats.
func pathErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err.Error()
}

// checkURL returns "" when u is fit to prefix download links.
func checkURL(u string) string {
	if strings.ContainsAny(u, "?#") {
		return wantURL
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
		return wantURL
	}
	if strings.HasSuffix(u, "/") {
		return wantURL + ", without a trailing slash"
	}
	return ""
}

// These match godotenv's syntax errors, which quote the rest of the file;
// fileError keeps only what is safe to print.
var (
	unexpectedCharRE = regexp.MustCompile(`(?s)^unexpected character ("(?:[^"\\]|\\.)*") in variable name near (".*")$`)
	unterminatedRE   = regexp.MustCompile(`(?s)^unterminated quoted value (.*)$`)
)

// fileError turns an error from godotenv.Read into a *FileError. Syntax
// errors are rewritten to a line number and a reason, because godotenv's
// messages quote the file's text from the bad spot onward, secrets included.
func fileError(path string, err error) *FileError {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &FileError{Path: path, Err: err}
	}
	// godotenv parses the text with CRLF turned into LF; do the same so the
	// quoted rest of the file can be found again.
	data, _ := os.ReadFile(path)
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	lineAt := func(i int) int {
		if i < 0 {
			return 0
		}
		return strings.Count(text[:i], "\n") + 1
	}
	msg := err.Error()
	if m := unexpectedCharRE.FindStringSubmatch(msg); m != nil {
		line := 0
		if rest, uerr := strconv.Unquote(m[2]); uerr == nil && rest != "" && strings.HasSuffix(text, rest) {
			line = lineAt(len(text) - len(rest))
		}
		return &FileError{Path: path, Line: line,
			Err: errors.New("unexpected character " + m[1] + " in a variable name")}
	}
	if m := unterminatedRE.FindStringSubmatch(msg); m != nil {
		// The value runs to the end of the file, so its opening is the last
		// place its first line appears.
		line := 0
		if m[1] != "" {
			line = lineAt(strings.LastIndex(text, m[1]))
		}
		return &FileError{Path: path, Line: line, Err: errors.New("unterminated quoted value")}
	}
	return &FileError{Path: path, Err: errors.New("malformed")}
}
