// Package sandboximage holds the sandbox image's sources, embedded so that a
// sandbox-setup binary can build the image without a checkout: the Dockerfile,
// the Debian package list, and the in-container programs (agentbox_init.py,
// PID 1; agentbox_kernel.py, the persistent Python namespace;
// agentbox_frames.py, the JSON-lines framing both use; agentbox_bridge.py,
// which hands a `docker exec` stream over to the init; agentbox_pip, the
// image's pip and pip3, which say where packages come from).
//
// The image carries labels naming the kernel protocol version and a content
// hash of these sources, so a stale image is detected by comparing labels,
// never by guessing from tags or dates.
//
// It also holds agentbox's seccomp profile (SeccompProfile), embedded apart
// from the image sources so that changing it needs no image rebuild.
package sandboximage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/kernel"
)

//go:embed Dockerfile packages.txt agentbox_init.py agentbox_kernel.py agentbox_frames.py agentbox_bridge.py agentbox_pip agentbox_supervisor.py agentbox_probes.py agentbox_tools.py agentbox_fileops.py
var sources embed.FS

// Labels set on every sandbox image.
const (
	LabelProtocol   = "io.agentbox.protocol"    // kernel protocol version the image speaks
	LabelSourceHash = "io.agentbox.source-hash" // SourceHash of the files it was built from
	LabelBase       = "io.agentbox.base"        // the base image it was built on
	LabelPackages   = "io.agentbox.packages"    // PackagesHash, on bootstrapped base images
)

// Paths of the in-container programs, as the Dockerfile installs them.
const (
	InitPath   = "/opt/agentbox/agentbox_init.py"
	KernelPath = "/opt/agentbox/agentbox_kernel.py"
	BridgePath = "/opt/agentbox/agentbox_bridge.py"
	// SupervisorPath runs one shell command for the host, as root (see
	// agentbox_supervisor.py); ProbesPath answers the host's short
	// questions (agentbox_probes.py: commands, complete).
	SupervisorPath = "/opt/agentbox/agentbox_supervisor.py"
	ProbesPath     = "/opt/agentbox/agentbox_probes.py"
	// FileOpsPath is the files API's helper (agentbox_fileops.py), which
	// the init forks as its files tool, and an engine exec may run.
	FileOpsPath = "/opt/agentbox/agentbox_fileops.py"
)

// The sandbox's two users. The init (PID 1) runs as root with only the
// capabilities it needs to start the kernel worker as the sandbox user and to
// signal it; the worker, and everything user code starts, runs as the
// sandbox user with no capabilities at all. Separate uids are what keep user
// code from tracing, signalling or talking to the init: the kernel refuses
// ptrace and kill across uids without CAP_SYS_PTRACE and CAP_KILL, and the
// init serves only peers of its own uid (SO_PEERCRED).
const (
	// InitUser is the user of the container's first process.
	InitUser = "0:0"
	// BridgeUser is the user the host runs the bridge as (docker exec -u).
	BridgeUser = "0"
	// UserEnv names the environment variable that tells the init which
	// user ("uid:gid") runs the kernel worker.
	UserEnv = "AGENTBOX_USER"
	// UserEnvPrefix begins, in the container's environment, the name of
	// each variable a session was created with (AGENTBOX_ENV_PYTHONPATH
	// for PYTHONPATH). The container's environment is its root init's: a
	// variable such as PYTHONPATH or PYTHONSTARTUP there would steer it.
	// The init and the command supervisor strip the prefix when they start
	// a process as the sandbox user (the kernel worker, a command), so
	// only those see the variables by their own names.
	UserEnvPrefix = "AGENTBOX_ENV_"
)

// InitCapabilities are the capabilities the container keeps (all others
// are dropped) for its init: SETUID and SETGID to start the worker as the
// sandbox user, KILL to interrupt and stop it across uids, SETPCAP to clear
// the worker's bounding set so nothing it runs can ever regain one.
func InitCapabilities() []string { return []string{"SETUID", "SETGID", "KILL", "SETPCAP"} }

// BridgeCommand is the command a host runs with `docker exec -i` to open a
// private stream to the kernel.
func BridgeCommand() []string {
	return []string{"python3", "-I", "-S", BridgePath}
}

// Files returns the embedded sources.
func Files() fs.FS { return sources }

func names() []string {
	entries, err := fs.ReadDir(sources, ".")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// SourceHash is a SHA-256 over every embedded file's name and content. Any
// change to the Dockerfile, the package list or the programs changes it, and
// with it the image sandbox-setup builds.
func SourceHash() string {
	h := sha256.New()
	h.Write([]byte("protocol " + strconv.Itoa(kernel.ProtocolVersion) + "\n"))
	for _, name := range names() {
		data, _ := sources.ReadFile(name)
		h.Write([]byte(name + "\x00" + strconv.Itoa(len(data)) + "\x00"))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Packages returns the Debian packages the image needs, from packages.txt.
func Packages() []string {
	data, _ := sources.ReadFile("packages.txt")
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out
}

// PackagesHash identifies a package list; a bootstrapped base image is reused
// only while the list it was made with is unchanged.
func PackagesHash(suite string) string {
	h := sha256.Sum256([]byte(suite + "\n" + strings.Join(Packages(), "\n")))
	return hex.EncodeToString(h[:])
}

// BuildContext returns the embedded sources as the tar archive `docker build`
// takes as its context.
func BuildContext() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names() {
		data, err := sources.ReadFile(name)
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
