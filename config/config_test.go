package config_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joho/godotenv"

	"github.com/agentbox/agentbox/config"
)

// env turns a map into a lookup function for FromLookup.
func env(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// varErrors returns every *VarError inside a joined error, in order.
func varErrors(t *testing.T, err error) []*config.VarError {
	t.Helper()
	var out []*config.VarError
	var walk func(error)
	walk = func(e error) {
		if ve, ok := e.(*config.VarError); ok {
			out = append(out, ve)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, inner := range j.Unwrap() {
				walk(inner)
			}
		}
	}
	walk(err)
	return out
}

// clearEnv unsets every variable the package reads for the rest of the
// test, so a developer's own settings cannot leak into LoadFile tests.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, v := range config.Vars() {
		t.Setenv(v.Name, "") // registers the restore
		if err := os.Unsetenv(v.Name); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	c, err := config.FromLookup(env(nil))
	if err != nil {
		t.Fatalf("FromLookup(empty): %v", err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"SESSION_STORAGE", c.SessionStorage, config.StorageTMPFS},
		{"DATASET_ACCESS", c.DatasetAccess, config.AccessAPI}, // LangGraph-Sandbox's default
		{"SESSIONS_ROOT", c.SessionsRoot, mustAbs(t, "sessions")},
		{"BLOBSTORE_DIR", c.BlobstoreDir, mustAbs(t, "blobstore")},
		{"ARTIFACTS_DB", c.ArtifactsDB, mustAbs(t, "artifacts.db")},
		{"DATASETS_HOST_RO", c.DatasetsHostRO, ""},
		{"SANDBOX_IMAGE", c.SandboxImage, "agentbox-sandbox:latest"},
		{"SANDBOX_EXTRA_PACKAGES", c.ExtraPackages, []string(nil)},
		{"TMPFS_SIZE_MB", c.TmpfsSizeMB, 1024},
		{"SESSION_DISK_MB", c.SessionDiskMB, 1024},
		{"DISK_RESERVE_MB", c.DiskReserveMB, 1024},
		{"AGENTBOX_NAMESPACE", c.Namespace, "agentbox"},
		{"SANDBOX_MEMORY_MB", c.MemoryMB, 1024},
		{"SANDBOX_CPUS", c.CPUs, 1.0},
		{"SANDBOX_PIDS_LIMIT", c.PidsLimit, 256},
		{"SANDBOX_NETWORK", c.Network, "none"},
		{"SANDBOX_RUNTIME", c.Runtime, ""},
		{"SANDBOX_USER", c.User, "1000:1000"},
		{"SANDBOX_ALLOW_ROOT", c.AllowRoot, false},
		{"SANDBOX_READ_ONLY_ROOT", c.ReadOnlyRoot, true},
		{"SANDBOX_SECCOMP", c.Seccomp, "default"},
		{"SANDBOX_ALLOW_UNCONFINED", c.AllowUnconfined, false},
		{"SANDBOX_ENV_PASSTHROUGH", c.EnvPassthrough, []string(nil)},
		{"EXEC_TIMEOUT_S", c.ExecTimeout, 120 * time.Second},
		{"INTERRUPT_GRACE_S", c.InterruptGrace, 5 * time.Second},
		{"IDLE_TIMEOUT_S", c.IdleTimeout, 45 * time.Minute},
		{"IDLE_ACTION", c.IdleAction, config.IdleStop},
		{"IDLE_PAUSED_TIMEOUT_S", c.IdlePausedTimeout, 24 * time.Hour},
		{"POOL_SIZE", c.PoolSize, 0},
		{"MAX_OUTPUT_BYTES", c.MaxOutputBytes, 1048576},
		{"ARTIFACT_SERVER_ADDR", c.ArtifactServerAddr, ":8000"},
		{"ARTIFACT_PUBLIC_URL", c.ArtifactPublicURL, "http://localhost:8000"},
		{"ARTIFACT_TOKEN_TTL_S", c.TokenTTL, 10 * time.Minute},
		{"ARTIFACT_TOKEN_SECRET", c.TokenSecret, ""},
		{"ARTIFACT_MAX_FILE_MB", c.ArtifactMaxFileMB, 100},
		{"ARTIFACT_MAX_FILES", c.ArtifactMaxFiles, 100},
		{"ARTIFACT_MAX_SESSION_MB", c.ArtifactMaxSessionMB, 1024},
		{"ARTIFACT_MOVE", c.ArtifactMove, false},
		{"ARTIFACT_FIGURES", c.ArtifactFigures, true},
		{"DATASETS_API_URL", c.DatasetsAPIURL, ""},
		{"DATASETS_API_TOKEN", c.DatasetsAPIToken, ""},
		{"DATASETS_API_TIMEOUT_S", c.DatasetsAPITimeout, 300 * time.Second},
		{"DATASET_MAX_MB", c.DatasetMaxMB, 1024},
		{"DATASET_CACHE_SCOPE", c.DatasetCacheScope, config.CacheSession},
		{"EXPORT_DIR", filepath.Base(c.ExportDir), "exports"},
		{"FILES_MAX_FILE_MB", c.FilesMaxFileMB, 1024},
		{"FILES_MAX_CALL_MB", c.FilesMaxCallMB, 2048},
		{"SESSION_TTL_S", c.SessionTTL, time.Duration(0)},
		{"SESSION_MAX_TTL_S", c.MaxSessionTTL, time.Duration(0)},
		{"SANDBOX_MAX_MEMORY_MB", c.MaxMemoryMB, 0},
		{"SANDBOX_MAX_CPUS", c.MaxCPUs, 0.0},
		{"SANDBOX_IMAGES", c.SandboxImages, map[string]string(nil)},
		{"SERVE_ADDR", c.ServeAddr, ":8080"},
		{"SERVE_API_KEYS", c.ServeAPIKeys, []string(nil)},
		{"SERVE_API_KEYS_FILE", c.ServeAPIKeysFile, ""},
		{"SERVE_ALLOWED_HOSTS", c.ServeAllowedHosts, []string(nil)},
		{"SERVE_MAX_CONNS_PER_CLIENT", c.ServeMaxConnsPerClient, 256},
		{"SERVE_METRICS_KEY", c.ServeMetricsKey, ""},
		{"SANDBOX_TOKEN_TTL_S", c.SandboxTokenTTL, 86400 * time.Second},
		{"TENANT_MAX_SANDBOXES", c.TenantMaxSandboxes, 16},
		{"TENANT_MAX_MEMORY_MB", c.TenantMaxMemoryMB, 16384},
		{"TENANT_MAX_INFLIGHT", c.TenantMaxInflight, 32},
		{"TENANT_MAX_ARTIFACT_MB", c.TenantMaxArtifactMB, 10240},
	}
	var names []string
	for _, tt := range tests {
		names = append(names, tt.name)
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
	// The table above must cover every variable the package knows.
	var known []string
	for _, v := range config.Vars() {
		known = append(known, v.Name)
	}
	if !slices.Equal(names, known) {
		t.Errorf("defaults table covers %v\nVars() lists %v", names, known)
	}
}

func TestDefaultIsRelativeAndValid(t *testing.T) {
	d := config.Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("Default().Validate(): %v", err)
	}
	for _, p := range []string{d.SessionsRoot, d.BlobstoreDir, d.ArtifactsDB, d.ExportDir} {
		if filepath.IsAbs(p) {
			t.Errorf("Default() path %q is absolute; want it as written in example.env", p)
		}
	}
	loaded, err := config.FromLookup(nil)
	if err != nil {
		t.Fatal(err)
	}
	d.SessionsRoot = mustAbs(t, d.SessionsRoot)
	d.BlobstoreDir = mustAbs(t, d.BlobstoreDir)
	d.ArtifactsDB = mustAbs(t, d.ArtifactsDB)
	d.ExportDir = mustAbs(t, d.ExportDir)
	if !reflect.DeepEqual(d, loaded) {
		t.Errorf("FromLookup(nil) = %+v\nwant Default() with absolute paths = %+v", loaded, d)
	}
}

func TestGoodValues(t *testing.T) {
	secret := strings.Repeat("s", 32)
	tests := []struct {
		name string
		env  map[string]string
		get  func(config.Config) any
		want any
	}{
		{"storage bind", map[string]string{"SESSION_STORAGE": "BIND"},
			func(c config.Config) any { return c.SessionStorage }, config.StorageBind},
		{"dataset cache per session", map[string]string{"DATASET_CACHE_SCOPE": " Session "},
			func(c config.Config) any { return c.DatasetCacheScope }, config.CacheSession},
		{"dataset cache per namespace", map[string]string{"DATASET_CACHE_SCOPE": "namespace"},
			func(c config.Config) any { return c.DatasetCacheScope }, config.CacheNamespace},
		{"storage lower case", map[string]string{"SESSION_STORAGE": "bind"},
			func(c config.Config) any { return c.SessionStorage }, config.StorageBind},
		{"storage mixed case and spaces", map[string]string{"SESSION_STORAGE": "  TmpFs \t"},
			func(c config.Config) any { return c.SessionStorage }, config.StorageTMPFS},
		{"storage blank means default", map[string]string{"SESSION_STORAGE": "   "},
			func(c config.Config) any { return c.SessionStorage }, config.StorageTMPFS},
		{"access api", map[string]string{"DATASET_ACCESS": "api"},
			func(c config.Config) any { return c.DatasetAccess }, config.AccessAPI},
		{"access none", map[string]string{"DATASET_ACCESS": "None"},
			func(c config.Config) any { return c.DatasetAccess }, config.AccessNone},
		{"sessions root absolute", map[string]string{"SESSIONS_ROOT": "/var/lib/agentbox/sessions"},
			func(c config.Config) any { return c.SessionsRoot }, "/var/lib/agentbox/sessions"},
		{"blobstore absolute", map[string]string{"BLOBSTORE_DIR": "/srv/blobs/"},
			func(c config.Config) any { return c.BlobstoreDir }, "/srv/blobs"},
		{"artifacts db absolute", map[string]string{"ARTIFACTS_DB": "/srv/a.db"},
			func(c config.Config) any { return c.ArtifactsDB }, "/srv/a.db"},
		{"datasets dir ignored without local access", map[string]string{"DATASETS_HOST_RO": "/does/not/exist"},
			func(c config.Config) any { return c.DatasetsHostRO }, "/does/not/exist"},
		{"image with tag", map[string]string{"SANDBOX_IMAGE": "python:3.12-slim"},
			func(c config.Config) any { return c.SandboxImage }, "python:3.12-slim"},
		{"image without tag", map[string]string{"SANDBOX_IMAGE": "agentbox-sandbox"},
			func(c config.Config) any { return c.SandboxImage }, "agentbox-sandbox"},
		{"image with registry", map[string]string{"SANDBOX_IMAGE": "ghcr.io/acme/agent_box/sandbox:v1.2"},
			func(c config.Config) any { return c.SandboxImage }, "ghcr.io/acme/agent_box/sandbox:v1.2"},
		{"image with registry port", map[string]string{"SANDBOX_IMAGE": "localhost:5000/sandbox"},
			func(c config.Config) any { return c.SandboxImage }, "localhost:5000/sandbox"},
		{"image with digest", map[string]string{"SANDBOX_IMAGE": "sandbox@sha256:" + strings.Repeat("ab", 32)},
			func(c config.Config) any { return c.SandboxImage }, "sandbox@sha256:" + strings.Repeat("ab", 32)},
		{"tmpfs minimum", map[string]string{"TMPFS_SIZE_MB": "16"},
			func(c config.Config) any { return c.TmpfsSizeMB }, 16},
		{"namespace", map[string]string{"AGENTBOX_NAMESPACE": " team-a "},
			func(c config.Config) any { return c.Namespace }, "team-a"},
		{"namespace of 32", map[string]string{"AGENTBOX_NAMESPACE": "0" + strings.Repeat("a-", 15) + "z"},
			func(c config.Config) any { return c.Namespace }, "0" + strings.Repeat("a-", 15) + "z"},
		{"memory", map[string]string{"SANDBOX_MEMORY_MB": " 4096 "},
			func(c config.Config) any { return c.MemoryMB }, 4096},
		{"memory minimum", map[string]string{"SANDBOX_MEMORY_MB": "64"},
			func(c config.Config) any { return c.MemoryMB }, 64},
		{"cpus fraction", map[string]string{"SANDBOX_CPUS": "0.5"},
			func(c config.Config) any { return c.CPUs }, 0.5},
		{"cpus maximum", map[string]string{"SANDBOX_CPUS": "64"},
			func(c config.Config) any { return c.CPUs }, 64.0},
		{"pids", map[string]string{"SANDBOX_PIDS_LIMIT": "16"},
			func(c config.Config) any { return c.PidsLimit }, 16},
		{"network bridge", map[string]string{"SANDBOX_NETWORK": "bridge"},
			func(c config.Config) any { return c.Network }, "bridge"},
		{"network user defined", map[string]string{"SANDBOX_NETWORK": "agents_net-1.local"},
			func(c config.Config) any { return c.Network }, "agents_net-1.local"},
		{"runtime", map[string]string{"SANDBOX_RUNTIME": "runsc"},
			func(c config.Config) any { return c.Runtime }, "runsc"},
		{"user uid", map[string]string{"SANDBOX_USER": "1001"},
			func(c config.Config) any { return c.User }, "1001"},
		{"user name", map[string]string{"SANDBOX_USER": "sandbox"},
			func(c config.Config) any { return c.User }, "sandbox"},
		{"user uid with gid 0 is not root", map[string]string{"SANDBOX_USER": "1000:0"},
			func(c config.Config) any { return c.User }, "1000:0"},
		{"root allowed explicitly", map[string]string{"SANDBOX_USER": "root", "SANDBOX_ALLOW_ROOT": "true"},
			func(c config.Config) any { return c.User }, "root"},
		{"uid 0 allowed explicitly", map[string]string{"SANDBOX_USER": "0:0", "SANDBOX_ALLOW_ROOT": "YES"},
			func(c config.Config) any { return c.AllowRoot }, true},
		{"bool 1", map[string]string{"SANDBOX_ALLOW_ROOT": "1"},
			func(c config.Config) any { return c.AllowRoot }, true},
		{"bool on", map[string]string{"SANDBOX_ALLOW_ROOT": "On"},
			func(c config.Config) any { return c.AllowRoot }, true},
		{"bool false", map[string]string{"SANDBOX_READ_ONLY_ROOT": "FALSE"},
			func(c config.Config) any { return c.ReadOnlyRoot }, false},
		{"bool 0", map[string]string{"SANDBOX_READ_ONLY_ROOT": "0"},
			func(c config.Config) any { return c.ReadOnlyRoot }, false},
		{"bool no", map[string]string{"SANDBOX_READ_ONLY_ROOT": "no"},
			func(c config.Config) any { return c.ReadOnlyRoot }, false},
		{"bool off", map[string]string{"SANDBOX_READ_ONLY_ROOT": "off"},
			func(c config.Config) any { return c.ReadOnlyRoot }, false},
		{"passthrough list", map[string]string{"SANDBOX_ENV_PASSTHROUGH": " HTTP_PROXY , https_proxy,_X1,"},
			func(c config.Config) any { return c.EnvPassthrough }, []string{"HTTP_PROXY", "https_proxy", "_X1"}},
		{"extra packages", map[string]string{"SANDBOX_EXTRA_PACKAGES": " python3-statsmodels, python3-seaborn,libstdc++6,"},
			func(c config.Config) any { return c.ExtraPackages }, []string{"python3-statsmodels", "python3-seaborn", "libstdc++6"}},
		{"exec timeout", map[string]string{"EXEC_TIMEOUT_S": "1"},
			func(c config.Config) any { return c.ExecTimeout }, time.Second},
		{"interrupt grace", map[string]string{"INTERRUPT_GRACE_S": "30"},
			func(c config.Config) any { return c.InterruptGrace }, 30 * time.Second},
		{"idle timeout disabled", map[string]string{"IDLE_TIMEOUT_S": "0"},
			func(c config.Config) any { return c.IdleTimeout }, time.Duration(0)},
		{"idle timeout", map[string]string{"IDLE_TIMEOUT_S": "60"},
			func(c config.Config) any { return c.IdleTimeout }, time.Minute},
		{"idle action pause", map[string]string{"IDLE_ACTION": " Pause "},
			func(c config.Config) any { return c.IdleAction }, config.IdlePause},
		{"idle action stop", map[string]string{"IDLE_ACTION": "STOP"},
			func(c config.Config) any { return c.IdleAction }, config.IdleStop},
		{"idle paused timeout", map[string]string{"IDLE_PAUSED_TIMEOUT_S": "3600"},
			func(c config.Config) any { return c.IdlePausedTimeout }, time.Hour},
		{"idle paused timeout never", map[string]string{"IDLE_PAUSED_TIMEOUT_S": "0"},
			func(c config.Config) any { return c.IdlePausedTimeout }, time.Duration(0)},
		{"pool size", map[string]string{"POOL_SIZE": "64"},
			func(c config.Config) any { return c.PoolSize }, 64},
		{"max output", map[string]string{"MAX_OUTPUT_BYTES": "1024"},
			func(c config.Config) any { return c.MaxOutputBytes }, 1024},
		{"server addr host", map[string]string{"ARTIFACT_SERVER_ADDR": "127.0.0.1:9000"},
			func(c config.Config) any { return c.ArtifactServerAddr }, "127.0.0.1:9000"},
		{"server addr ipv6", map[string]string{"ARTIFACT_SERVER_ADDR": "[::1]:0"},
			func(c config.Config) any { return c.ArtifactServerAddr }, "[::1]:0"},
		{"public url https with path", map[string]string{"ARTIFACT_PUBLIC_URL": "https://files.example.com/agentbox/"},
			func(c config.Config) any { return c.ArtifactPublicURL }, "https://files.example.com/agentbox"},
		{"public url trailing slashes", map[string]string{"ARTIFACT_PUBLIC_URL": "http://localhost:8000//"},
			func(c config.Config) any { return c.ArtifactPublicURL }, "http://localhost:8000"},
		{"token ttl maximum", map[string]string{"ARTIFACT_TOKEN_TTL_S": "86400"},
			func(c config.Config) any { return c.TokenTTL }, 24 * time.Hour},
		{"token secret", map[string]string{"ARTIFACT_TOKEN_SECRET": " " + secret + " "},
			func(c config.Config) any { return c.TokenSecret }, secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.FromLookup(env(tt.env))
			if err != nil {
				t.Fatalf("FromLookup(%v): %v", tt.env, err)
			}
			if got := tt.get(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestBadValues(t *testing.T) {
	tests := []struct {
		name, value string
		want        string
	}{
		{"SESSION_STORAGE", "RAM", `SESSION_STORAGE="RAM": want TMPFS or BIND`},
		{"SESSION_STORAGE", " ram ", `SESSION_STORAGE="ram": want TMPFS or BIND`},
		{"DATASET_ACCESS", "S3", `DATASET_ACCESS="S3": want NONE, LOCAL_RO, API or HYBRID`},
		{"AGENTBOX_NAMESPACE", "Team-A", `AGENTBOX_NAMESPACE="Team-A": want ` + wantNamespace},
		{"AGENTBOX_NAMESPACE", "team_a", `AGENTBOX_NAMESPACE="team_a": want ` + wantNamespace},
		{"AGENTBOX_NAMESPACE", "-team", `AGENTBOX_NAMESPACE="-team": want ` + wantNamespace},
		{"AGENTBOX_NAMESPACE", strings.Repeat("a", 33), `AGENTBOX_NAMESPACE="` + strings.Repeat("a", 33) + `": want ` + wantNamespace},
		{"SANDBOX_IMAGE", "Agentbox:latest", `SANDBOX_IMAGE="Agentbox:latest": want an image reference such as "agentbox-sandbox:latest" (lowercase repository, no spaces)`},
		{"SANDBOX_IMAGE", "agentbox sandbox", `SANDBOX_IMAGE="agentbox sandbox": want an image reference such as "agentbox-sandbox:latest" (lowercase repository, no spaces)`},
		{"SANDBOX_IMAGE", "MyOrg/sandbox", `SANDBOX_IMAGE="MyOrg/sandbox": want an image reference such as "agentbox-sandbox:latest" (lowercase repository, no spaces)`},
		{"SANDBOX_IMAGE", "sandbox:", `SANDBOX_IMAGE="sandbox:": want an image reference such as "agentbox-sandbox:latest" (lowercase repository, no spaces)`},
		{"SANDBOX_IMAGE", "a:b:c", `SANDBOX_IMAGE="a:b:c": want an image reference such as "agentbox-sandbox:latest" (lowercase repository, no spaces)`},
		{"TMPFS_SIZE_MB", "lots", `TMPFS_SIZE_MB="lots": want an integer ≥ 16`},
		{"TMPFS_SIZE_MB", "8", `TMPFS_SIZE_MB="8": want an integer ≥ 16`},
		{"TMPFS_SIZE_MB", "1.5", `TMPFS_SIZE_MB="1.5": want an integer ≥ 16`},
		{"SANDBOX_MEMORY_MB", "63", `SANDBOX_MEMORY_MB="63": want an integer ≥ 64`},
		{"SANDBOX_MEMORY_MB", "1g", `SANDBOX_MEMORY_MB="1g": want an integer ≥ 64`},
		{"SANDBOX_CPUS", "0", `SANDBOX_CPUS="0": want a number > 0 and ≤ 64`},
		{"SANDBOX_CPUS", "64.5", `SANDBOX_CPUS="64.5": want a number > 0 and ≤ 64`},
		{"SANDBOX_CPUS", "NaN", `SANDBOX_CPUS="NaN": want a number > 0 and ≤ 64`},
		{"SANDBOX_CPUS", "two", `SANDBOX_CPUS="two": want a number > 0 and ≤ 64`},
		{"SANDBOX_PIDS_LIMIT", "15", `SANDBOX_PIDS_LIMIT="15": want an integer ≥ 16`},
		{"SANDBOX_NETWORK", "container:abc", `SANDBOX_NETWORK="container:abc": want none, bridge, host or a network name matching ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`},
		{"SANDBOX_NETWORK", "-net", `SANDBOX_NETWORK="-net": want none, bridge, host or a network name matching ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`},
		{"SANDBOX_RUNTIME", "run sc", `SANDBOX_RUNTIME="run sc": want an OCI runtime name such as runsc, matching ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`},
		{"SANDBOX_USER", "root", `SANDBOX_USER="root": want a non-root user, or SANDBOX_ALLOW_ROOT=true to run as root`},
		{"SANDBOX_USER", "0", `SANDBOX_USER="0": want a non-root user, or SANDBOX_ALLOW_ROOT=true to run as root`},
		{"SANDBOX_USER", "000", `SANDBOX_USER="000": want a non-root user, or SANDBOX_ALLOW_ROOT=true to run as root`},
		{"SANDBOX_USER", "0:1000", `SANDBOX_USER="0:1000": want a non-root user, or SANDBOX_ALLOW_ROOT=true to run as root`},
		{"SANDBOX_USER", "root:root", `SANDBOX_USER="root:root": want a non-root user, or SANDBOX_ALLOW_ROOT=true to run as root`},
		{"SANDBOX_USER", "1000:", `SANDBOX_USER="1000:": want a uid, uid:gid or user name`},
		{"SANDBOX_USER", "Bad User", `SANDBOX_USER="Bad User": want a uid, uid:gid or user name`},
		{"SANDBOX_ALLOW_ROOT", "maybe", `SANDBOX_ALLOW_ROOT="maybe": want true or false`},
		{"SANDBOX_READ_ONLY_ROOT", "maybe", `SANDBOX_READ_ONLY_ROOT="maybe": want true or false`},
		{"SANDBOX_SECCOMP", "strict", `SANDBOX_SECCOMP="strict": want ` + wantSeccomp},
		{"SANDBOX_SECCOMP", "profiles/strict.json", `SANDBOX_SECCOMP="profiles/strict.json": want ` + wantSeccomp},
		{"SANDBOX_SECCOMP", "unconfined", `SANDBOX_SECCOMP="unconfined": want default, engine or a profile file; unconfined (no seccomp filter at all) needs SANDBOX_ALLOW_UNCONFINED=true`},
		{"SANDBOX_SECCOMP", "/nonexistent/seccomp.json", `SANDBOX_SECCOMP="/nonexistent/seccomp.json": want ` + wantSeccomp + ` (/nonexistent/seccomp.json does not exist)`},
		{"SANDBOX_SECCOMP", "/dev/zero", `SANDBOX_SECCOMP="/dev/zero": want ` + wantSeccomp + ` (/dev/zero is not a regular file)`},
		{"SANDBOX_ALLOW_UNCONFINED", "maybe", `SANDBOX_ALLOW_UNCONFINED="maybe": want true or false`},
		{"SANDBOX_ENV_PASSTHROUGH", "HOME,1BAD", `SANDBOX_ENV_PASSTHROUGH="HOME,1BAD": want comma-separated variable names matching ^[A-Za-z_][A-Za-z0-9_]*$ ("1BAD" does not)`},
		{"SANDBOX_EXTRA_PACKAGES", "python3-seaborn,Python3-X", `SANDBOX_EXTRA_PACKAGES="python3-seaborn,Python3-X": want comma-separated Debian package names matching ^[a-z0-9][a-z0-9+.-]+$, such as python3-statsmodels,python3-seaborn ("Python3-X" does not)`},
		{"SANDBOX_EXTRA_PACKAGES", "x;rm", `SANDBOX_EXTRA_PACKAGES="x;rm": want comma-separated Debian package names matching ^[a-z0-9][a-z0-9+.-]+$, such as python3-statsmodels,python3-seaborn ("x;rm" does not)`},
		{"SANDBOX_ENV_PASSTHROUGH", "A B", `SANDBOX_ENV_PASSTHROUGH="A B": want comma-separated variable names matching ^[A-Za-z_][A-Za-z0-9_]*$ ("A B" does not)`},
		{"EXEC_TIMEOUT_S", "0", `EXEC_TIMEOUT_S="0": want an integer ≥ 1`},
		{"EXEC_TIMEOUT_S", "1.5", `EXEC_TIMEOUT_S="1.5": want an integer ≥ 1`},
		{"EXEC_TIMEOUT_S", "2m", `EXEC_TIMEOUT_S="2m": want an integer ≥ 1`},
		{"INTERRUPT_GRACE_S", "0", `INTERRUPT_GRACE_S="0": want an integer ≥ 1`},
		{"IDLE_TIMEOUT_S", "-1", `IDLE_TIMEOUT_S="-1": want an integer ≥ 0 (0 disables eviction)`},
		{"IDLE_TIMEOUT_S", "99999999999", `IDLE_TIMEOUT_S="99999999999": want an integer ≥ 0 (0 disables eviction)`},
		{"IDLE_ACTION", "freeze", `IDLE_ACTION="freeze": want stop or pause`},
		{"IDLE_PAUSED_TIMEOUT_S", "-5", `IDLE_PAUSED_TIMEOUT_S="-5": want an integer ≥ 0 (0 keeps paused idle sessions until their time to live)`},
		{"POOL_SIZE", "65", `POOL_SIZE="65": want an integer from 0 to 64`},
		{"POOL_SIZE", "-1", `POOL_SIZE="-1": want an integer from 0 to 64`},
		{"MAX_OUTPUT_BYTES", "1023", `MAX_OUTPUT_BYTES="1023": want an integer ≥ 1024`},
		{"ARTIFACT_SERVER_ADDR", "8000", `ARTIFACT_SERVER_ADDR="8000": want host:port with a port from 0 to 65535, such as ":8000"`},
		{"ARTIFACT_SERVER_ADDR", ":http", `ARTIFACT_SERVER_ADDR=":http": want host:port with a port from 0 to 65535, such as ":8000"`},
		{"ARTIFACT_SERVER_ADDR", ":65536", `ARTIFACT_SERVER_ADDR=":65536": want host:port with a port from 0 to 65535, such as ":8000"`},
		{"ARTIFACT_SERVER_ADDR", "localhost:", `ARTIFACT_SERVER_ADDR="localhost:": want host:port with a port from 0 to 65535, such as ":8000"`},
		{"ARTIFACT_PUBLIC_URL", "localhost:8000", `ARTIFACT_PUBLIC_URL="localhost:8000": want an absolute http or https URL with a host and no query, fragment or user info`},
		{"ARTIFACT_PUBLIC_URL", "ftp://files.example.com", `ARTIFACT_PUBLIC_URL="ftp://files.example.com": want an absolute http or https URL with a host and no query, fragment or user info`},
		{"ARTIFACT_PUBLIC_URL", "/artifacts", `ARTIFACT_PUBLIC_URL="/artifacts": want an absolute http or https URL with a host and no query, fragment or user info`},
		{"ARTIFACT_PUBLIC_URL", "http://", `ARTIFACT_PUBLIC_URL="http://": want an absolute http or https URL with a host and no query, fragment or user info`},
		{"ARTIFACT_PUBLIC_URL", "http://x.example/?a=1", `ARTIFACT_PUBLIC_URL="http://x.example/?a=1": want an absolute http or https URL with a host and no query, fragment or user info`},
		{"ARTIFACT_PUBLIC_URL", "http://x.example#top", `ARTIFACT_PUBLIC_URL="http://x.example#top": want an absolute http or https URL with a host and no query, fragment or user info`},
		{"ARTIFACT_PUBLIC_URL", "http://u:p@x.example", `ARTIFACT_PUBLIC_URL="http://u:p@x.example": want an absolute http or https URL with a host and no query, fragment or user info`},
		{"ARTIFACT_TOKEN_TTL_S", "0", `ARTIFACT_TOKEN_TTL_S="0": want an integer from 1 to 86400`},
		{"ARTIFACT_TOKEN_TTL_S", "86401", `ARTIFACT_TOKEN_TTL_S="86401": want an integer from 1 to 86400`},
		{"ARTIFACT_TOKEN_SECRET", "short-secret", `ARTIFACT_TOKEN_SECRET=<redacted, 12 chars>: want at least 32 characters`},
		{"ARTIFACT_MAX_FILE_MB", "0", `ARTIFACT_MAX_FILE_MB="0": want an integer from 1 to 1048576`},
		{"FILES_MAX_FILE_MB", "0", `FILES_MAX_FILE_MB="0": want an integer from 1 to 1048576`},
		{"FILES_MAX_FILE_MB", "1MB", `FILES_MAX_FILE_MB="1MB": want an integer from 1 to 1048576`},
		{"FILES_MAX_CALL_MB", "2097152", `FILES_MAX_CALL_MB="2097152": want an integer from 1 to 1048576`},
		{"ARTIFACT_MAX_FILES", "-3", `ARTIFACT_MAX_FILES="-3": want an integer from 1 to 1048576`},
		{"ARTIFACT_MAX_SESSION_MB", "lots", `ARTIFACT_MAX_SESSION_MB="lots": want an integer from 0 to 1073741824`},
		{"TENANT_MAX_SANDBOXES", "-1", `TENANT_MAX_SANDBOXES="-1": want an integer ≥ 0`},
		{"TENANT_MAX_INFLIGHT", "many", `TENANT_MAX_INFLIGHT="many": want an integer ≥ 0`},
		{"ARTIFACT_MOVE", "maybe", `ARTIFACT_MOVE="maybe": want true or false`},
		{"DATASETS_API_URL", "https://data.example/x", `DATASETS_API_URL="https://data.example/x": want an http or https URL containing {id}, such as https://data.example/datasets/{id}`},
		{"DATASETS_API_URL", "ftp://h/{id}", `DATASETS_API_URL="ftp://h/{id}": want an http or https URL containing {id}, such as https://data.example/datasets/{id}`},
		{"DATASET_MAX_MB", "0", `DATASET_MAX_MB="0": want an integer from 1 to 1048576`},
		{"DATASET_CACHE_SCOPE", "user", `DATASET_CACHE_SCOPE="user": want shared, namespace or session`},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := config.FromLookup(env(map[string]string{tt.name: tt.value}))
			if err == nil {
				t.Fatal("FromLookup succeeded; want an error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got %s\nwant %s", got, tt.want)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false")
			}
			var ve *config.VarError
			if !errors.As(err, &ve) || ve.Name != tt.name {
				t.Errorf("errors.As found %+v; want a *VarError for %s", ve, tt.name)
			}
		})
	}
}

func TestDatasetsHostRO(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "file.parquet", "x")
	missing := filepath.Join(dir, "nope")
	tests := []struct {
		name   string
		access string
		host   *string // nil leaves DATASETS_HOST_RO unset
		want   string  // error; "" for success
	}{
		{"local ok", "LOCAL_RO", &dir, ""},
		{"hybrid ok", "hybrid", &dir, ""},
		{"local absent", "LOCAL_RO", nil,
			`DATASETS_HOST_RO="": want a directory, required when DATASET_ACCESS=LOCAL_RO`},
		{"hybrid absent", "HYBRID", nil,
			`DATASETS_HOST_RO="": want a directory, required when DATASET_ACCESS=HYBRID (LangGraph-Sandbox's HYBRID_LOCAL_PATH is read as it)`},
		{"local missing", "LOCAL_RO", &missing,
			`DATASETS_HOST_RO="` + missing + `": want an existing directory (` + missing + ` does not exist)`},
		{"hybrid missing", "HYBRID", &missing,
			`DATASETS_HOST_RO="` + missing + `": want an existing directory (` + missing + ` does not exist)`},
		{"local not a directory", "LOCAL_RO", &file,
			`DATASETS_HOST_RO="` + file + `": want an existing directory (` + file + ` is not a directory)`},
		{"hybrid not a directory", "HYBRID", &file,
			`DATASETS_HOST_RO="` + file + `": want an existing directory (` + file + ` is not a directory)`},
		{"api needs none", "API", nil, ""},
		{"none does not check", "NONE", &missing, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{"DATASET_ACCESS": tt.access}
			if tt.host != nil {
				m["DATASETS_HOST_RO"] = *tt.host
			}
			c, err := config.FromLookup(env(m))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("FromLookup: %v", err)
				}
				if tt.host != nil && c.DatasetsHostRO != *tt.host {
					t.Errorf("DatasetsHostRO = %q, want %q", c.DatasetsHostRO, *tt.host)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("error\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestRelativePaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := config.FromLookup(env(map[string]string{
		"SESSIONS_ROOT":    "state/sessions",
		"BLOBSTORE_DIR":    "./blobs/../blobstore",
		"DATASET_ACCESS":   "LOCAL_RO",
		"DATASETS_HOST_RO": "data",
		// ARTIFACTS_DB keeps its relative default.
	}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"SESSIONS_ROOT", c.SessionsRoot, filepath.Join(dir, "state", "sessions")},
		{"BLOBSTORE_DIR", c.BlobstoreDir, filepath.Join(dir, "blobstore")},
		{"ARTIFACTS_DB", c.ArtifactsDB, filepath.Join(dir, "artifacts.db")},
		{"DATASETS_HOST_RO", c.DatasetsHostRO, filepath.Join(dir, "data")},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}

	// A relative dataset directory that is missing is reported as written,
	// with the absolute path it was taken to mean.
	_, err = config.FromLookup(env(map[string]string{"DATASET_ACCESS": "LOCAL_RO", "DATASETS_HOST_RO": "gone"}))
	want := `DATASETS_HOST_RO="gone": want an existing directory (` + filepath.Join(dir, "gone") + ` does not exist)`
	if err == nil || err.Error() != want {
		t.Errorf("error\n got %v\nwant %s", err, want)
	}
}

func TestSeveralErrorsReportedTogether(t *testing.T) {
	_, err := config.FromLookup(env(map[string]string{
		"ARTIFACT_TOKEN_SECRET":  "tiny",
		"SANDBOX_USER":           "root",
		"TMPFS_SIZE_MB":          "lots",
		"SESSION_STORAGE":        "RAM",
		"SANDBOX_READ_ONLY_ROOT": "maybe",
		"SANDBOX_MEMORY_MB":      "2048", // good, must not appear
	}))
	if err == nil {
		t.Fatal("FromLookup succeeded; want errors")
	}
	// Reported in the order of Vars, whatever the order of the input.
	want := strings.Join([]string{
		`SESSION_STORAGE="RAM": want TMPFS or BIND`,
		`TMPFS_SIZE_MB="lots": want an integer ≥ 16`,
		`SANDBOX_USER="root": want a non-root user, or SANDBOX_ALLOW_ROOT=true to run as root`,
		`SANDBOX_READ_ONLY_ROOT="maybe": want true or false`,
		`ARTIFACT_TOKEN_SECRET=<redacted, 4 chars>: want at least 32 characters`,
	}, "\n")
	if err.Error() != want {
		t.Errorf("error\n got %s\nwant %s", err, want)
	}
	var names []string
	for _, ve := range varErrors(t, err) {
		if !errors.Is(ve, config.ErrInvalid) {
			t.Errorf("%s does not match ErrInvalid", ve.Name)
		}
		names = append(names, ve.Name)
	}
	wantNames := []string{"SESSION_STORAGE", "TMPFS_SIZE_MB", "SANDBOX_USER", "SANDBOX_READ_ONLY_ROOT", "ARTIFACT_TOKEN_SECRET"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("VarError names = %v, want %v", names, wantNames)
	}
	var ve *config.VarError
	if !errors.As(err, &ve) || ve.Name != "SESSION_STORAGE" {
		t.Errorf("errors.As found %+v, want the first VarError", ve)
	}
}

func TestSecretNeverEchoed(t *testing.T) {
	const short = "hunter2-but-longer"
	_, err := config.FromLookup(env(map[string]string{"ARTIFACT_TOKEN_SECRET": short}))
	if err == nil {
		t.Fatal("short secret accepted")
	}
	var ve *config.VarError
	if !errors.As(err, &ve) {
		t.Fatalf("no VarError in %v", err)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		for _, v := range []any{err, ve, *ve} {
			if s := fmt.Sprintf(format, v); strings.Contains(s, short) {
				t.Errorf("Sprintf(%q, %T) leaks the secret: %s", format, v, s)
			}
		}
	}
	if !ve.Secret || ve.Value != "<redacted, 18 chars>" {
		t.Errorf("VarError = %+v, want Secret and a redacted Value", ve)
	}

	// A valid secret is redacted when the config is printed or logged.
	long := strings.Repeat("k", 40)
	c, err := config.FromLookup(env(map[string]string{"ARTIFACT_TOKEN_SECRET": long}))
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"%v", "%+v", "%s"} {
		if s := fmt.Sprintf(format, c); strings.Contains(s, long) {
			t.Errorf("Sprintf(%q, Config) leaks the secret: %s", format, s)
		}
	}
	if !strings.Contains(c.String(), "ARTIFACT_TOKEN_SECRET=<redacted, 40 chars>\n") {
		t.Errorf("String() does not show the secret redacted:\n%s", c)
	}

	// Validate on a Config built in code redacts too.
	c.TokenSecret = short
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), short) {
		t.Errorf("Validate() = %v; want an error without the secret", err)
	}
}

func TestLoadFile(t *testing.T) {
	secret := "s3cr3t-" + strings.Repeat("x", 30)
	tests := []struct {
		name     string
		file     *string           // nil: no file
		env      map[string]string // set in the process environment
		check    func(t *testing.T, c config.Config)
		wantErr  string // substring of the error; "" for success
		invalid  bool   // error must match ErrInvalid
		fileLine int    // expected FileError.Line, when a FileError
	}{
		{
			name: "file is read",
			file: new("SESSION_STORAGE=bind\nexport TMPFS_SIZE_MB=64\n# a comment\nSANDBOX_CPUS=\"2.5\"\nOTHER_APP_SETTING=ignored\n"),
			check: func(t *testing.T, c config.Config) {
				if c.SessionStorage != config.StorageBind || c.TmpfsSizeMB != 64 || c.CPUs != 2.5 {
					t.Errorf("got %s", c)
				}
			},
		},
		{
			name: "environment wins over file",
			file: new("SANDBOX_MEMORY_MB=2048\nPOOL_SIZE=2\n"),
			env:  map[string]string{"SANDBOX_MEMORY_MB": "4096"},
			check: func(t *testing.T, c config.Config) {
				if c.MemoryMB != 4096 || c.PoolSize != 2 {
					t.Errorf("MemoryMB = %d, PoolSize = %d; want 4096 from the environment, 2 from the file", c.MemoryMB, c.PoolSize)
				}
			},
		},
		{
			name: "empty environment value wins and means default",
			file: new("SANDBOX_MEMORY_MB=2048\n"),
			env:  map[string]string{"SANDBOX_MEMORY_MB": ""},
			check: func(t *testing.T, c config.Config) {
				if c.MemoryMB != 1024 {
					t.Errorf("MemoryMB = %d, want the default 1024", c.MemoryMB)
				}
			},
		},
		{
			name: "missing file is fine",
			env:  map[string]string{"POOL_SIZE": "3"},
			check: func(t *testing.T, c config.Config) {
				if c.PoolSize != 3 || c.SessionStorage != config.StorageTMPFS {
					t.Errorf("got %s", c)
				}
			},
		},
		{
			name:    "bad value in file",
			file:    new("TMPFS_SIZE_MB=lots\n"),
			wantErr: `TMPFS_SIZE_MB="lots": want an integer ≥ 16`,
			invalid: true,
		},
		{
			name:     "malformed key line",
			file:     new("SESSION_STORAGE=BIND\nTHIS IS NOT VALID\nARTIFACT_TOKEN_SECRET=" + secret + "\n"),
			wantErr:  `.env": line 2: unexpected character "\n" in a variable name`,
			invalid:  true,
			fileLine: 2,
		},
		{
			name:     "malformed with CRLF line ends",
			file:     new("A=1\r\nB=2\r\nC-D=3\r\nARTIFACT_TOKEN_SECRET=" + secret + "\r\n"),
			wantErr:  `.env": line 3: unexpected character "-" in a variable name`,
			invalid:  true,
			fileLine: 3,
		},
		{
			name:     "unterminated quote",
			file:     new("A=1\n\nARTIFACT_TOKEN_SECRET=\"" + secret + "\nB=2\n"),
			wantErr:  `.env": line 3: unterminated quoted value`,
			invalid:  true,
			fileLine: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			path := filepath.Join(t.TempDir(), ".env")
			if tt.file != nil {
				writeFile(t, filepath.Dir(path), ".env", *tt.file)
			}
			c, err := config.LoadFile(path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("LoadFile: %v", err)
				}
				tt.check(t, c)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error\n got %v\nwant it to contain %s", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error leaks the file's contents: %v", err)
			}
			if got := errors.Is(err, config.ErrInvalid); got != tt.invalid {
				t.Errorf("errors.Is(err, ErrInvalid) = %v, want %v", got, tt.invalid)
			}
			var fe *config.FileError
			if tt.fileLine > 0 {
				if !errors.As(err, &fe) || fe.Path != path || fe.Line != tt.fileLine {
					t.Errorf("FileError = %+v, want path %s line %d", fe, path, tt.fileLine)
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("error %q does not name the file %s", err, path)
				}
			}
		})
	}
}

func TestLoadFileUnreadable(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir() // a directory opens but cannot be read as a file
	_, err := config.LoadFile(dir)
	var fe *config.FileError
	if !errors.As(err, &fe) || fe.Path != dir {
		t.Fatalf("LoadFile(dir) = %v; want a FileError for %s", err, dir)
	}
	want := `env file "` + dir + `": is a directory`
	if err.Error() != want {
		t.Errorf("error\n got %s\nwant %s", err, want)
	}
	if errors.Is(err, config.ErrInvalid) {
		t.Errorf("an unreadable file matches ErrInvalid; it is an I/O error")
	}
}

func TestLoadFileDoesNotChangeEnvironment(t *testing.T) {
	clearEnv(t)
	path := writeFile(t, t.TempDir(), ".env", "SESSION_STORAGE=BIND\n")
	if _, err := config.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if v, ok := os.LookupEnv("SESSION_STORAGE"); ok {
		t.Errorf("LoadFile set SESSION_STORAGE=%q in the process environment", v)
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name string
		file *string
		want config.Storage
	}{
		{"reads .env in the working directory", new("SESSION_STORAGE=BIND\n"), config.StorageBind},
		{"no .env", nil, config.StorageTMPFS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			dir := t.TempDir()
			t.Chdir(dir)
			if tt.file != nil {
				writeFile(t, dir, ".env", *tt.file)
			}
			c, err := config.Load()
			if err != nil {
				t.Fatal(err)
			}
			if c.SessionStorage != tt.want {
				t.Errorf("SessionStorage = %s, want %s", c.SessionStorage, tt.want)
			}
			if want := filepath.Join(dir, "sessions"); c.SessionsRoot != want {
				t.Errorf("SessionsRoot = %s, want %s", c.SessionsRoot, want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	profile := writeFile(t, t.TempDir(), "seccomp.json", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []}`)
	tests := []struct {
		name   string
		mutate func(c *config.Config)
		want   string // "" for valid
	}{
		{"default", func(*config.Config) {}, ""},
		{"sub-second durations allowed in code", func(c *config.Config) {
			c.IdleTimeout = 100 * time.Millisecond
			c.InterruptGrace = 1500 * time.Millisecond
		}, ""},
		{"unknown storage", func(c *config.Config) { c.SessionStorage = "RAM" },
			`SESSION_STORAGE="RAM": want TMPFS or BIND`},
		{"lower-case storage is not normalised in code", func(c *config.Config) { c.SessionStorage = "bind" },
			`SESSION_STORAGE="bind": want TMPFS or BIND`},
		{"empty path", func(c *config.Config) { c.BlobstoreDir = "" },
			`BLOBSTORE_DIR="": want a path`},
		{"short exec timeout", func(c *config.Config) { c.ExecTimeout = 500 * time.Millisecond },
			`EXEC_TIMEOUT_S="0.5": want an integer ≥ 1`},
		{"negative idle timeout", func(c *config.Config) { c.IdleTimeout = -time.Second },
			`IDLE_TIMEOUT_S="-1": want an integer ≥ 0 (0 disables eviction)`},
		{"trailing slash", func(c *config.Config) { c.ArtifactPublicURL = "http://localhost:8000/" },
			`ARTIFACT_PUBLIC_URL="http://localhost:8000/": want an absolute http or https URL with a host and no query, fragment or user info, without a trailing slash`},
		{"root without permission", func(c *config.Config) { c.User = "0" },
			`SANDBOX_USER="0": want a non-root user, or SANDBOX_ALLOW_ROOT=true to run as root`},
		{"root with permission", func(c *config.Config) { c.User, c.AllowRoot = "0", true }, ""},
		{"unconfined without permission", func(c *config.Config) { c.Seccomp = config.SeccompUnconfined },
			`SANDBOX_SECCOMP="unconfined": want default, engine or a profile file; unconfined (no seccomp filter at all) needs SANDBOX_ALLOW_UNCONFINED=true`},
		{"unconfined with permission", func(c *config.Config) { c.Seccomp, c.AllowUnconfined = config.SeccompUnconfined, true }, ""},
		{"seccomp names another engine value", func(c *config.Config) { c.Seccomp = "Default" },
			`SANDBOX_SECCOMP="Default": want ` + wantSeccomp},
		{"seccomp file whose profile is not loaded", func(c *config.Config) { c.Seccomp = profile },
			`SANDBOX_SECCOMP="` + profile + `": want ` + wantSeccomp + ` (its content is not loaded: set SeccompJSON too, or load the configuration with FromLookup)`},
		{"seccomp file that is missing", func(c *config.Config) { c.Seccomp = "/nonexistent/p.json" },
			`SANDBOX_SECCOMP="/nonexistent/p.json": want ` + wantSeccomp + ` (/nonexistent/p.json does not exist)`},
		{"seccomp file with its profile", func(c *config.Config) {
			c.Seccomp, c.SeccompJSON = "/etc/agentbox/seccomp.json", `{"defaultAction": "SCMP_ACT_ERRNO"}`
		}, ""},
		{"seccomp file with a broken profile", func(c *config.Config) {
			c.Seccomp, c.SeccompJSON = "/etc/agentbox/seccomp.json", `{"defaultAction": `
		}, `SANDBOX_SECCOMP="/etc/agentbox/seccomp.json": want ` + wantSeccomp + ` (/etc/agentbox/seccomp.json: not JSON: unexpected end of JSON input)`},
		{"passthrough item with comma", func(c *config.Config) { c.EnvPassthrough = []string{"A,B"} },
			`SANDBOX_ENV_PASSTHROUGH="A,B": want comma-separated variable names matching ^[A-Za-z_][A-Za-z0-9_]*$ ("A,B" does not)`},
		{"zero cpus", func(c *config.Config) { c.CPUs = 0 },
			`SANDBOX_CPUS="0": want a number > 0 and ≤ 64`},
		{"local datasets without directory", func(c *config.Config) { c.DatasetAccess = config.AccessLocalRO },
			`DATASETS_HOST_RO="": want a directory, required when DATASET_ACCESS=LOCAL_RO`},
		{"zero value", func(c *config.Config) { *c = config.Config{} }, strings.Join([]string{
			`SESSION_STORAGE="": want TMPFS or BIND`,
			`DATASET_ACCESS="": want NONE, LOCAL_RO, API or HYBRID`,
			`SESSIONS_ROOT="": want a path`,
			`BLOBSTORE_DIR="": want a path`,
			`ARTIFACTS_DB="": want a path`,
			`SANDBOX_IMAGE="": want an image reference such as "agentbox-sandbox:latest" (lowercase repository, no spaces)`,
			`TMPFS_SIZE_MB="0": want an integer ≥ 16`,
			`SANDBOX_MEMORY_MB="0": want an integer ≥ 64`,
			`SANDBOX_CPUS="0": want a number > 0 and ≤ 64`,
			`SANDBOX_PIDS_LIMIT="0": want an integer ≥ 16`,
			`SANDBOX_NETWORK="": want none, bridge, host or a network name matching ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`,
			`SANDBOX_USER="": want a uid, uid:gid or user name`,
			`SANDBOX_SECCOMP="": want ` + wantSeccomp,
			`EXEC_TIMEOUT_S="0": want an integer ≥ 1`,
			`INTERRUPT_GRACE_S="0": want an integer ≥ 1`,
			`MAX_OUTPUT_BYTES="0": want an integer ≥ 1024`,
			`ARTIFACT_SERVER_ADDR="": want host:port with a port from 0 to 65535, such as ":8000"`,
			`ARTIFACT_PUBLIC_URL="": want an absolute http or https URL with a host and no query, fragment or user info`,
			`ARTIFACT_TOKEN_TTL_S="0": want an integer from 1 to 86400`,
			`ARTIFACT_MAX_FILE_MB="0": want an integer from 1 to 1048576`,
			`ARTIFACT_MAX_FILES="0": want an integer from 1 to 1048576`,
			`DATASETS_API_TIMEOUT_S="0": want an integer ≥ 1`,
			`DATASET_MAX_MB="0": want an integer from 1 to 1048576`,
			`EXPORT_DIR="": want a path`,
			`FILES_MAX_FILE_MB="0": want an integer from 1 to 1048576`,
			`FILES_MAX_CALL_MB="0": want an integer from 1 to 1048576`,
			`SERVE_ADDR="": want host:port with a port from 0 to 65535, such as ":8000"`,
			`SANDBOX_TOKEN_TTL_S="0": want an integer from 60 to 604800`,
		}, "\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			tt.mutate(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate error\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestStringRoundTrip(t *testing.T) {
	c, err := config.FromLookup(env(map[string]string{
		"SESSION_STORAGE":         "BIND",
		"SANDBOX_CPUS":            "0.25",
		"SANDBOX_ENV_PASSTHROUGH": "HTTP_PROXY,NO_PROXY",
		"IDLE_TIMEOUT_S":          "0",
		"SANDBOX_RUNTIME":         "runsc",
	}))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := godotenv.Unmarshal(c.String())
	if err != nil {
		t.Fatalf("String() is not a valid env file: %v\n%s", err, c)
	}
	again, err := config.FromLookup(env(parsed))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, again) {
		t.Errorf("round trip through String() changed the config\nbefore %+v\nafter  %+v", c, again)
	}
}

func TestVars(t *testing.T) {
	nameRE := regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	seen := make(map[string]bool)
	defaults := make(map[string]string)
	for _, v := range config.Vars() {
		if !nameRE.MatchString(v.Name) || seen[v.Name] {
			t.Errorf("bad or duplicate name %q", v.Name)
		}
		seen[v.Name] = true
		if v.Help == "" {
			t.Errorf("%s has no help", v.Name)
		}
		defaults[v.Name] = v.Default
	}
	// Each documented default, written out, gives the same Config as
	// leaving the variable unset.
	explicit, err := config.FromLookup(env(defaults))
	if err != nil {
		t.Fatalf("documented defaults do not load: %v", err)
	}
	implicit, err := config.FromLookup(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(explicit, implicit) {
		t.Errorf("documented defaults give %+v\nbuilt-in defaults give %+v", explicit, implicit)
	}
}

// TestExampleEnv keeps example.env in step with the code: every variable is
// there with its default, nothing unknown is, and the file's values load.
func TestExampleEnv(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "example.env"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lineRE := regexp.MustCompile(`^# ([A-Z][A-Z0-9_]*)=(.*)$`)
	documented := make(map[string]string)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if _, dup := documented[m[1]]; dup {
			t.Errorf("example.env:%d: %s documented twice", n, m[1])
		}
		documented[m[1]] = m[2]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	known := make(map[string]bool)
	for _, v := range config.Vars() {
		known[v.Name] = true
		got, ok := documented[v.Name]
		switch {
		case !ok:
			t.Errorf("example.env does not document %s (want a line `# %s=%s`)", v.Name, v.Name, v.Default)
		case v.Default != "" && got != v.Default:
			// A variable unset by default may show an example instead.
			t.Errorf("example.env shows %s=%s, want the default %s", v.Name, got, v.Default)
		}
	}
	for name := range documented {
		if !known[name] {
			t.Errorf("example.env documents %s, which the package does not read", name)
		}
	}
	// Uncommented, the file must load (DATASETS_HOST_RO's example is not
	// checked because DATASET_ACCESS is NONE).
	if _, err := config.FromLookup(env(documented)); err != nil {
		t.Errorf("example.env values do not load: %v", err)
	}
}

func TestDatasetAccess(t *testing.T) {
	tests := []struct {
		access        config.DatasetAccess
		local, viaAPI bool
	}{
		{config.AccessNone, false, false},
		{config.AccessLocalRO, true, false},
		{config.AccessAPI, false, true},
		{config.AccessHybrid, true, true},
	}
	for _, tt := range tests {
		if got := tt.access.UsesLocal(); got != tt.local {
			t.Errorf("%s.UsesLocal() = %v, want %v", tt.access, got, tt.local)
		}
		if got := tt.access.UsesAPI(); got != tt.viaAPI {
			t.Errorf("%s.UsesAPI() = %v, want %v", tt.access, got, tt.viaAPI)
		}
	}
}

func TestVarError(t *testing.T) {
	tests := []struct {
		err  *config.VarError
		want string
	}{
		{&config.VarError{Name: "A", Value: `x"y`, Want: "z"}, `A="x\"y": want z`},
		{&config.VarError{Name: "S", Value: "<redacted, 3 chars>", Want: "more", Secret: true}, `S=<redacted, 3 chars>: want more`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %s, want %s", got, tt.want)
		}
		if !errors.Is(tt.err, config.ErrInvalid) {
			t.Errorf("%s does not match ErrInvalid", tt.err)
		}
	}
}

const wantSeccomp = "default, engine, unconfined (with SANDBOX_ALLOW_UNCONFINED=true) or the absolute path of a JSON seccomp profile"

// TestSeccomp covers SANDBOX_SECCOMP: each value, what the engine is then
// given, and the profile files that are refused.
func TestSeccomp(t *testing.T) {
	builtin := []byte(`{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []}`)
	dir := t.TempDir()
	good := `{"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1, "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}]}`
	goodPath := writeFile(t, dir, "good.json", "\n"+good+"\n")

	tests := []struct {
		name       string
		env        map[string]string
		setting    string
		toEngine   string
		withoutAck bool
	}{
		{"unset", nil, "default", string(builtin), false},
		{"default", map[string]string{"SANDBOX_SECCOMP": "default"}, "default", string(builtin), false},
		{"any case", map[string]string{"SANDBOX_SECCOMP": " DEFAULT "}, "default", string(builtin), false},
		{"engine", map[string]string{"SANDBOX_SECCOMP": "engine"}, "engine", "", false},
		{"engine any case", map[string]string{"SANDBOX_SECCOMP": "Engine"}, "engine", "", false},
		{"unconfined acknowledged", map[string]string{"SANDBOX_SECCOMP": "unconfined", "SANDBOX_ALLOW_UNCONFINED": "true"}, "unconfined", "unconfined", true},
		{"file", map[string]string{"SANDBOX_SECCOMP": goodPath}, goodPath, "\n" + good + "\n", false},
		{"acknowledgement alone changes nothing", map[string]string{"SANDBOX_ALLOW_UNCONFINED": "true"}, "default", string(builtin), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.FromLookup(env(tt.env))
			if err != nil {
				t.Fatalf("FromLookup(%v): %v", tt.env, err)
			}
			if c.Seccomp != tt.setting {
				t.Errorf("Seccomp = %q, want %q", c.Seccomp, tt.setting)
			}
			if got := c.SeccompProfile(builtin); got != tt.toEngine {
				t.Errorf("SeccompProfile = %.60q, want %.60q", got, tt.toEngine)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			// The setting survives String and loading again.
			parsed, err := godotenv.Unmarshal(c.String())
			if err != nil {
				t.Fatal(err)
			}
			again, err := config.FromLookup(env(parsed))
			if err != nil || !reflect.DeepEqual(again, c) {
				t.Errorf("round trip through String(): %v\n got %+v\nwant %+v", err, again, c)
			}
			if tt.withoutAck {
				c.AllowUnconfined = false
				if c.Validate() == nil {
					t.Error("Validate accepts unconfined without SANDBOX_ALLOW_UNCONFINED")
				}
			}
		})
	}

	// The zero value (a Config built by hand) gets the most confined
	// profile, never none.
	if got := (config.Config{}).SeccompProfile(builtin); got != string(builtin) {
		t.Errorf("zero Config: SeccompProfile = %q, want the built-in profile", got)
	}
	// So does a path whose content was never loaded (Validate refuses it).
	if got := (config.Config{Seccomp: goodPath}).SeccompProfile(builtin); got != string(builtin) {
		t.Errorf("unloaded profile file: SeccompProfile = %q, want the built-in profile", got)
	}

	unreadable := writeFile(t, dir, "unreadable.json", good)
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name, path, detail string
	}{
		{"not json", writeFile(t, dir, "bad.json", `{"defaultAction": "SCMP_ACT_ERRNO",}`), "not JSON: invalid character '}' looking for beginning of object key string"},
		{"not an object", writeFile(t, dir, "list.json", `["read"]`), "not a seccomp profile: want a JSON object with a defaultAction"},
		{"no default action", writeFile(t, dir, "noaction.json", `{"syscalls": []}`), "not a seccomp profile: want a JSON object with a defaultAction"},
		{"empty", writeFile(t, dir, "empty.json", ""), "not JSON: unexpected end of JSON input"},
		{"too large", writeFile(t, dir, "big.json", `{"defaultAction": "SCMP_ACT_ERRNO", "x": "`+strings.Repeat("x", 1<<20)+`"}`), "larger than 1 MiB"},
		{"directory", dir, ""},
		{"device", "/dev/zero", ""},
		{"unreadable", unreadable, "permission denied"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "unreadable" && os.Geteuid() == 0 {
				t.Skip("root reads a file whatever its mode")
			}
			done := make(chan error, 1)
			go func() {
				_, err := config.FromLookup(env(map[string]string{"SANDBOX_SECCOMP": tt.path}))
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("loading blocks on the file")
			}
			if err == nil {
				t.Fatal("FromLookup succeeded; want an error")
			}
			want := `SANDBOX_SECCOMP="` + tt.path + `": want ` + wantSeccomp + ` (` + tt.path + `: ` + tt.detail + `)`
			if tt.detail == "" {
				want = `SANDBOX_SECCOMP="` + tt.path + `": want ` + wantSeccomp + ` (` + tt.path + ` is not a regular file)`
			}
			if got := err.Error(); got != want {
				t.Errorf("error\n got %s\nwant %s", got, want)
			}
			var ve *config.VarError
			if !errors.As(err, &ve) || ve.Name != "SANDBOX_SECCOMP" {
				t.Errorf("errors.As found %+v; want a *VarError for SANDBOX_SECCOMP", ve)
			}
		})
	}
}

const wantNamespace = "lowercase letters, digits and dashes, at most 32, starting with a letter or digit"

// TestNamespace covers AGENTBOX_NAMESPACE: read from a .env file like every
// setting, the real environment winning, kept through String, and empty in
// a Config made in code before the field existed (the default then).
func TestNamespace(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	envFile := writeFile(t, dir, ".env", "AGENTBOX_NAMESPACE=from-file\n")
	c, err := config.LoadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "from-file" {
		t.Errorf(".env: Namespace = %q, want from-file", c.Namespace)
	}
	t.Setenv("AGENTBOX_NAMESPACE", "from-env")
	if c, err = config.LoadFile(envFile); err != nil || c.Namespace != "from-env" {
		t.Errorf("environment over .env: Namespace = %q (%v), want from-env", c.Namespace, err)
	}
	parsed, err := godotenv.Unmarshal(c.String())
	if err != nil {
		t.Fatal(err)
	}
	if parsed["AGENTBOX_NAMESPACE"] != "from-env" {
		t.Errorf("String() has AGENTBOX_NAMESPACE=%q", parsed["AGENTBOX_NAMESPACE"])
	}

	c = config.Default()
	c.Namespace = ""
	if err := c.Validate(); err != nil {
		t.Errorf("Validate with an empty Namespace (the default): %v", err)
	}
	c.Namespace = "Team A"
	if err := c.Validate(); err == nil || err.Error() != `AGENTBOX_NAMESPACE="Team A": want `+wantNamespace {
		t.Errorf("Validate(Namespace %q) = %v", c.Namespace, err)
	}
}
