package sandboximage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

func TestProtocolVersionsAgree(t *testing.T) {
	src, err := fs.ReadFile(sandboximage.Files(), "agentbox_init.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PROTOCOL = (\d+)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("agentbox_init.py declares no PROTOCOL")
	}
	if v, _ := strconv.Atoi(string(m[1])); v != kernel.ProtocolVersion {
		t.Fatalf("init speaks protocol %d, kernel package %d", v, kernel.ProtocolVersion)
	}
}

func TestBuildContextHoldsEverySource(t *testing.T) {
	data, err := sandboximage.BuildContext()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	for _, want := range []string{"Dockerfile", "packages.txt", "agentbox_init.py", "agentbox_kernel.py", "agentbox_frames.py", "agentbox_bridge.py", "agentbox_pip"} {
		if !slices.Contains(names, want) {
			t.Errorf("build context lacks %s (has %v)", want, names)
		}
	}
	for _, pkg := range []string{"python3", "python3-pandas", "python3-pyarrow", "python3-matplotlib", "python3-scipy", "python3-sklearn", "python3-numpy"} {
		if !slices.Contains(sandboximage.Packages(), pkg) {
			t.Errorf("packages.txt lacks %s", pkg)
		}
	}
	if h := sandboximage.SourceHash(); len(h) != 64 || h != sandboximage.SourceHash() {
		t.Fatalf("SourceHash %q is not a stable SHA-256", h)
	}
}

// TestInitGoldenTranscripts runs the init's own tests (test_init.py, over the
// transcripts the Go client is tested against) inside the real image.
func TestInitGoldenTranscripts(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	here, _ := os.Getwd()
	golden, _ := filepath.Abs(filepath.Join(here, "..", "kernel", "testdata"))
	spec := imagesetup.LockedDown(image)
	spec.Entrypoint = []string{"python3", "/src/test_init.py", "/golden"}
	spec.Labels = map[string]string{dockertest.LabelTest: t.Name()}
	spec.Mounts = []docker.Mount{{Source: here, Target: "/src", ReadOnly: true}, {Source: golden, Target: "/golden", ReadOnly: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := cli.CreateContainer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.RemoveContainer(context.WithoutCancel(ctx), id)
	code, err := cli.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, _ := cli.Logs(ctx, id)
	if code != 0 || !strings.Contains(stderr, "OK") {
		t.Fatalf("test_init.py exited %d\n%s%s", code, stdout, stderr)
	}
}
