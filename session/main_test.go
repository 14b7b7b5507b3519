package session_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/session"
)

// engineExamples are the examples that run on the engine. An example
// cannot skip itself, so TestMain does what dockertest.Engine does for a
// test: without an engine they are skipped with the reason (unless
// AGENTBOX_REQUIRE_DOCKER=1, where they run and fail), and with one the
// sandbox image is made current first.
var engineExamples = []string{"ExampleManager_Exec", "ExampleManager_WriteFiles", "ExampleManager_Run", "ExampleManager_StartCommand"}

func TestMain(m *testing.M) {
	flag.Parse()
	if slices.ContainsFunc(engineExamples, selected) {
		engineExample := strings.Join(engineExamples, ", ")
		if err := exampleEngine(); err != nil {
			if os.Getenv(dockertest.RequireEnv) == "1" {
				fmt.Fprintf(os.Stderr, "%s: %v\n", engineExample, err)
				os.Exit(1)
			}
			skip := "^(" + strings.Join(engineExamples, "|") + ")$"
			if s := flag.Lookup("test.skip").Value.String(); s != "" {
				skip = s + "|" + skip
			}
			_ = flag.Set("test.skip", skip)
			fmt.Fprintf(os.Stderr, "skipping %s: %v (set %s=1 to make this a failure)\n", engineExample, err, dockertest.RequireEnv)
		}
	}
	os.Exit(m.Run())
}

// selected reports whether -run and -skip let the example named run.
func selected(name string) bool {
	match := func(flagName string) (matched, set bool) {
		p := flag.Lookup(flagName).Value.String()
		if p == "" {
			return false, false
		}
		ok, err := regexp.MatchString(p, name)
		return ok || err != nil, true
	}
	if ok, set := match("test.run"); set && !ok {
		return false
	}
	skipped, _ := match("test.skip")
	return !skipped
}

// exampleEngine pings the engine and makes the sandbox image current (under
// the lock the test harness takes, so test binaries never build it twice).
func exampleEngine() error {
	cli, err := docker.New()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = cli.Info(ctx)
	cancel()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "agentbox-test-image.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("image lock: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("image lock: %w", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	_, err = imagesetup.Ensure(ctx, cli, imagesetup.Options{Image: dockertest.ImageName(), Out: os.Stderr})
	return err
}

// exampleSetup is what the examples use in place of config.Load(): the
// defaults, with files in a folder of their own, the image tests use, and
// a namespace of their own whose containers carry the test label. cleanup
// removes the folder.
func exampleSetup() (cfg config.Config, opts []session.Option, cleanup func()) {
	dir, err := os.MkdirTemp("", "agentbox-example")
	if err != nil {
		panic(err)
	}
	cfg = config.Default()
	cfg.SandboxImage = dockertest.ImageName()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	var b [4]byte
	_, _ = rand.Read(b[:])
	opts = []session.Option{
		session.WithNamespace("example-" + hex.EncodeToString(b[:])),
		session.WithLabels(map[string]string{dockertest.LabelTest: "example"}),
	}
	return cfg, opts, func() { os.RemoveAll(dir) }
}
