// Command genprofile writes agentbox's seccomp profile: Moby's default
// profile (seccompgen.UpstreamModule at seccompgen.UpstreamVersion, taken
// from the Go module cache, downloaded into it through the module proxy when
// missing) without the syscalls in seccompgen.Removals. Run it from
// sandbox-image with `go generate`, or as
//
//	go run ./sandbox-image/internal/seccompgen/genprofile -o sandbox-image/seccomp.json
//
// It never adds the upstream module to go.mod.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/sandbox-image/internal/seccompgen"
)

func main() {
	out := flag.String("o", "seccomp.json", "file to write")
	upstream := flag.String("upstream", "", "upstream default.json to read (default: from the Go module cache)")
	flag.Parse()
	if err := run(*out, *upstream); err != nil {
		fmt.Fprintf(os.Stderr, "genprofile: %v\n", err)
		os.Exit(1)
	}
}

func run(out, upstream string) error {
	if upstream == "" {
		dir, err := download()
		if err != nil {
			return err
		}
		upstream = filepath.Join(dir, seccompgen.UpstreamFile)
	}
	src, err := os.ReadFile(upstream)
	if err != nil {
		return err
	}
	profile, removed, err := seccompgen.Derive(src)
	if err != nil {
		return fmt.Errorf("%s: %w", upstream, err)
	}
	if err := writeFile(out, profile); err != nil {
		return err
	}
	var absent []string
	for _, n := range seccompgen.Denied() {
		if !slices.Contains(removed, n) {
			absent = append(absent, n)
		}
	}
	fmt.Printf("wrote %s from %s@%s: removed %s; already not allowed upstream: %s\n",
		out, seccompgen.UpstreamModule, seccompgen.UpstreamVersion, strings.Join(removed, " "), strings.Join(absent, " "))
	return nil
}

// download puts the upstream module in the module cache (a no-op when it
// is there) and returns its directory. `go mod download` with an explicit
// version leaves go.mod alone.
func download() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", seccompgen.UpstreamModule+"@"+seccompgen.UpstreamVersion)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	var mod struct{ Dir, Error string }
	_ = json.Unmarshal(data, &mod)
	if err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s %s", seccompgen.UpstreamModule, seccompgen.UpstreamVersion, err, mod.Error, strings.TrimSpace(stderr.String()))
	}
	return mod.Dir, nil
}

// writeFile replaces name atomically (temporary file, fsync, rename).
func writeFile(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".seccomp-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
