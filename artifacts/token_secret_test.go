package artifacts_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
)

func TestLoadOrCreateSecretCreates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new", "dir", ".artifact-token-secret")
	first, err := artifacts.LoadOrCreateSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 64 {
		t.Errorf("secret %q: want 64 hex characters", first)
	}
	if _, err := hex.DecodeString(string(first)); err != nil {
		t.Errorf("secret %q is not hex: %v", first, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("mode %04o, want 0600", perm)
	}
	again, err := artifacts.LoadOrCreateSecret(path)
	if err != nil || !bytes.Equal(first, again) {
		t.Errorf("second load = %q, %v; want %q", again, err, first)
	}
	// No temporary files are left next to it.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the secret", len(entries))
	}
	if _, err := artifacts.NewSigner(artifacts.Keys{Current: artifacts.Key{Secret: first}}, 0); err != nil {
		t.Errorf("generated secret refused by NewSigner: %v", err)
	}
}

func TestLoadOrCreateSecretRefuses(t *testing.T) {
	long := strings.Repeat("k", 40)
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"group readable", long, 0o640, "group or others"},
		{"world readable", long, 0o604, "group or others"},
		{"group writable", long, 0o620, "group or others"},
		{"short", strings.Repeat("k", 31) + "\n", 0o600, "want at least 32"},
		{"empty", "", 0o600, "want at least 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			s, err := artifacts.LoadOrCreateSecret(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("LoadOrCreateSecret = %q, %v; want an error naming the file and saying %q", s, err, tt.want)
			}
			// Refused, not repaired.
			if got, _ := os.ReadFile(path); string(got) != tt.content {
				t.Errorf("file changed to %q", got)
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		if _, err := artifacts.LoadOrCreateSecret(t.TempDir()); err == nil {
			t.Error("a directory was accepted")
		}
	})
	t.Run("hand-written", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "secret")
		os.WriteFile(path, []byte(long+"\r\n"), 0o600)
		s, err := artifacts.LoadOrCreateSecret(path)
		if err != nil || string(s) != long {
			t.Errorf("LoadOrCreateSecret = %q, %v; want %q without the line break", s, err, long)
		}
	})
}

func TestLoadOrCreateSecretConcurrentGoroutines(t *testing.T) {
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "secret")
		const n = 8
		got := make([][]byte, n)
		errs := make([]error, n)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range n {
			wg.Go(func() {
				start.Wait()
				got[i], errs[i] = artifacts.LoadOrCreateSecret(path)
			})
		}
		start.Done()
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d, goroutine %d: %v", round, i, errs[i])
			}
			if !bytes.Equal(got[i], got[0]) {
				t.Fatalf("round %d: goroutine %d got %q, goroutine 0 got %q", round, i, got[i], got[0])
			}
		}
	}
}

// secretHelperEnv makes the test binary a helper process that loads the
// secret named by its value and prints it; see TestSecretHelperProcess.
const secretHelperEnv = "AGENTBOX_TEST_SECRET_PATH"

// TestSecretHelperProcess is not a test: it is the body of the processes
// started by TestLoadOrCreateSecretConcurrentProcesses. It waits for a gate
// file so that both processes race for the secret at the same moment.
func TestSecretHelperProcess(t *testing.T) {
	path := os.Getenv(secretHelperEnv)
	if path == "" {
		t.Skip("helper process only")
	}
	gate := path + ".go"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if _, err := os.Stat(gate); err == nil {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	s, err := artifacts.LoadOrCreateSecret(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("SECRET=%s\n", s)
	os.Exit(0)
}

func TestLoadOrCreateSecretConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		path := filepath.Join(t.TempDir(), "secret")
		var cmds [2]*exec.Cmd
		var outs [2]bytes.Buffer
		for i := range cmds {
			c := exec.Command(exe, "-test.run=^TestSecretHelperProcess$", "-test.count=1")
			c.Env = append(os.Environ(), secretHelperEnv+"="+path)
			c.Stdout, c.Stderr = &outs[i], &outs[i]
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[i] = c
		}
		// Give both processes time to start and poll the gate.
		time.Sleep(200 * time.Millisecond)
		if err := os.WriteFile(path+".go", nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var secrets [2]string
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("round %d, process %d: %v\n%s", round, i, err, outs[i].String())
			}
			_, after, ok := strings.Cut(outs[i].String(), "SECRET=")
			if !ok {
				t.Fatalf("process %d printed no secret:\n%s", i, outs[i].String())
			}
			secrets[i], _, _ = strings.Cut(after, "\n")
		}
		onDisk, err := artifacts.LoadOrCreateSecret(path)
		if err != nil {
			t.Fatal(err)
		}
		if secrets[0] != secrets[1] || secrets[0] != string(onDisk) {
			t.Fatalf("round %d: processes disagree: %q, %q; file has %q", round, secrets[0], secrets[1], onDisk)
		}
	}
}
