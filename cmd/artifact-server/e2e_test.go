package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// TestEndToEnd builds the real artifact-server binary and serves the
// database and blobstore a session manager writes: code in a sandbox writes
// a file, and the URL in the result downloads the same bytes from the
// server process.
func TestEndToEnd(t *testing.T) {
	cli := dockertest.Engine(t)
	image := dockertest.Image(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "artifact-server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cfg := config.Default()
	cfg.SandboxImage = image
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.ArtifactServerAddr = "127.0.0.1:0"

	srv := exec.Command(bin, "serve")
	// The server's configuration is the test's alone, whatever the shell
	// exports (ARTIFACT_TOKEN_SECRET, say, would sign with another key).
	configured := map[string]bool{}
	for _, v := range config.Vars() {
		configured[v.Name] = true
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !configured[name] {
			srv.Env = append(srv.Env, kv)
		}
	}
	srv.Env = append(srv.Env, "ARTIFACTS_DB="+cfg.ArtifactsDB, "BLOBSTORE_DIR="+cfg.BlobstoreDir,
		"SESSIONS_ROOT="+cfg.SessionsRoot, "ARTIFACT_SERVER_ADDR="+cfg.ArtifactServerAddr)
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindString(sc.Text()); m != "" {
				addr <- m
			}
		}
	}()
	select {
	case cfg.ArtifactPublicURL = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("the server never said where it listens")
	}

	var b [4]byte
	rand.Read(b[:])
	ns := "t-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	m, err := session.NewManager(ctx, cfg, session.WithNamespace(ns), session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close(context.Background())
		dockertest.Sweep(context.Background(), cli, session.LabelNamespace+"="+ns)
	})
	res, err := m.Exec(ctx, "e2e", `
import os
os.makedirs('/session/artifacts', exist_ok=True)
data = bytes(range(256)) * 4096
open('/session/artifacts/blob.bin', 'wb').write(data)
print(len(data))`)
	if err != nil || res.Error != nil || len(res.Artifacts) != 1 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	resp, err := http.Get(res.Artifacts[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(body) != 256*4096 {
		t.Fatalf("download: %s, %d bytes", resp.Status, len(body))
	}
	for i, c := range body {
		if c != byte(i%256) {
			t.Fatalf("byte %d is %d", i, c)
		}
	}
	if got := resp.Header.Get("Etag"); got != `"`+res.Artifacts[0].SHA256+`"` {
		t.Errorf("ETag %s, want the sha256 %s", got, res.Artifacts[0].SHA256)
	}
}
