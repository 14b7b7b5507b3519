package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
)

// syncBuffer is a bytes.Buffer safe to write from the server goroutine
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testEnv writes an env file putting the database and the blobstore in a
// temporary directory and listening on a free loopback port, plus extra
// lines, and returns its path and the directory. The real environment wins
// over an env file, so every variable the configuration reads is unset for
// the test: a shell exporting ARTIFACTS_DB (or any other) changes nothing.
func testEnv(t *testing.T, extra ...string) (envFile, dir string) {
	t.Helper()
	for _, v := range config.Vars() {
		t.Setenv(v.Name, "") // restored when the test ends
		os.Unsetenv(v.Name)
	}
	dir = t.TempDir()
	lines := append([]string{
		"ARTIFACTS_DB=" + filepath.Join(dir, "db", "agentbox.db"),
		"BLOBSTORE_DIR=" + filepath.Join(dir, "blobs"),
		"ARTIFACT_SERVER_ADDR=127.0.0.1:0",
	}, extra...)
	envFile = filepath.Join(dir, "test.env")
	if err := os.WriteFile(envFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return envFile, dir
}

// failFast bounds a run that is expected to return by itself: one that
// serves instead fails the test within seconds, not at the test binary's
// timeout.
func failFast(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestUsage(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "absent.env")
	badEnv, _ := testEnv(t, "ARTIFACT_SERVER_ADDR=nowhere")
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"help", []string{"-h"}, exitOK},
		{"gc help", []string{"-env-file", absent, "gc", "-h"}, exitOK},
		{"unknown flag", []string{"-bogus"}, exitUsage},
		{"unknown command", []string{"-env-file", absent, "fetch"}, exitUsage},
		{"serve with an argument", []string{"-env-file", absent, "serve", "x"}, exitUsage},
		{"gc with an argument", []string{"-env-file", absent, "gc", "x"}, exitUsage},
		{"gc negative age", []string{"-env-file", absent, "gc", "-older-than", "-1h"}, exitUsage},
		{"bad configuration", []string{"-env-file", badEnv}, exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(failFast(t), tt.args, &out, &errb); code != tt.want {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.want, &out, &errb)
			}
		})
	}
}

func TestBadSecretFile(t *testing.T) {
	env, dir := testEnv(t)
	secret := filepath.Join(dir, "db", artifacts.SecretFileName)
	os.MkdirAll(filepath.Dir(secret), 0o700)
	if err := os.WriteFile(secret, []byte(strings.Repeat("s", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(secret, 0o644)
	var out, errb bytes.Buffer
	code := run(failFast(t), []string{"-env-file", env}, &out, &errb)
	if code != exitProblem || !strings.Contains(errb.String(), "group or others") {
		t.Errorf("exit %d, stderr %q; want %d and the permission problem", code, errb.String(), exitProblem)
	}
}

func TestServe(t *testing.T) {
	env, dir := testEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-env-file", env, "serve"}, &out, &errb) }()

	addrRE := regexp.MustCompile(`http://(127\.0\.0\.1:[0-9]+)`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(out.String()); m != nil {
			base = "http://" + m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("exited %d before serving\nstderr: %s", code, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving after 10 s\nstdout: %s\nstderr: %s", out.String(), errb.String())
		}
	}

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(base + "/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("healthz: %d %s", code, body)
	}

	// Ingest an artifact as a session manager would, in the same files,
	// and sign its URL with the secret the server generated.
	secretPath := artifacts.SecretPath(filepath.Join(dir, "db", "agentbox.db"))
	info, err := os.Stat(secretPath)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode %04o, want 0600", info.Mode().Perm())
	}
	db, err := store.Open(t.Context(), filepath.Join(dir, "db", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sha, size, err := artifacts.NewBlobstore(filepath.Join(dir, "blobs")).Put(t.Context(), strings.NewReader("a,b\n1,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := artifacts.NewIndex(db).Add(t.Context(), artifacts.Artifact{
		SessionID: "s1", Name: "out/table.csv", SHA256: sha, Size: size, MIME: "text/csv"})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := artifacts.LoadOrCreateSecret(secretPath)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := artifacts.NewSigner(artifacts.Keys{Current: artifacts.Key{Secret: secret}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	url, _, err := signer.URL(base, a.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(url); code != 200 || body != "a,b\n1,2\n" {
		t.Errorf("download: %d %q", code, body)
	}
	other, _, _ := signer.URL(base, "someone-else", time.Now())
	if code, _ := get(strings.Replace(other, "someone-else", a.ID, 1)); code != http.StatusForbidden {
		t.Errorf("token for another artifact: %d, want 403", code)
	}

	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after cancel, want 0\nstderr: %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still serving 10 s after cancel")
	}
	if !strings.Contains(out.String(), "stopped") {
		t.Errorf("stdout %q does not say it stopped", out.String())
	}
}

func TestServeAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env, _ := testEnv(t, "ARTIFACT_SERVER_ADDR="+ln.Addr().String(), "ARTIFACT_TOKEN_SECRET="+strings.Repeat("k", 32))
	var out, errb bytes.Buffer
	code := run(failFast(t), []string{"-env-file", env}, &out, &errb)
	if code != exitProblem || !strings.Contains(errb.String(), "address already in use") {
		t.Errorf("exit %d, stderr %q; want %d and the listen error", code, &errb, exitProblem)
	}
}

func TestGC(t *testing.T) {
	env, dir := testEnv(t)
	blobs := artifacts.NewBlobstore(filepath.Join(dir, "blobs"))
	sha, _, err := blobs.Put(t.Context(), strings.NewReader("nobody refers to me"))
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	// The blob is fresh, so the default grace spares it.
	if code := run(t.Context(), []string{"-env-file", env, "gc"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, &errb)
	}
	if !strings.Contains(out.String(), "removed 0 ") {
		t.Errorf("stdout %q, want nothing removed within the grace", &out)
	}
	out.Reset()
	time.Sleep(20 * time.Millisecond)
	if code := run(t.Context(), []string{"-env-file", env, "gc", "-grace", "1ms", "-older-than", "1h"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, &errb)
	}
	if !strings.Contains(out.String(), "removed 1 ") || !strings.Contains(out.String(), "forgot 0 ") {
		t.Errorf("stdout %q, want one blob removed and no artifact forgotten", &out)
	}
	if _, err := blobs.Open(sha); err == nil {
		t.Error("the unreferenced blob is still there")
	}
}
