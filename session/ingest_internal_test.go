package session

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpenArtifactsLink: when the code replaced the artifacts folder with a
// link, the host must neither read nor remove what the link names on the
// host. (The sandbox's own listing reports such a folder as a link; this is
// the host's defence should a listing or a swap after it lie.)
func TestOpenArtifactsLink(t *testing.T) {
	hostDir := t.TempDir()
	secret := filepath.Join(hostDir, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{hostDir, "../../../../../../../../" + hostDir} {
		local := t.TempDir()
		if err := os.Symlink(target, filepath.Join(local, "artifacts")); err != nil {
			t.Fatal(err)
		}
		if root, err := openArtifacts(local); err == nil {
			root.Close()
			t.Errorf("link to %s: opened", target)
		}
		m := &Manager{}
		if err := m.removeFile(t.Context(), &entry{}, local, "secret"); err == nil {
			t.Errorf("link to %s: removeFile succeeded", target)
		}
	}
	if got, err := os.ReadFile(secret); err != nil || string(got) != "host secret" {
		t.Errorf("host file: %q, %v", got, err)
	}

	// A link that stays inside the session folder is followed.
	local := t.TempDir()
	if err := os.Mkdir(filepath.Join(local, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "out", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("out", filepath.Join(local, "artifacts")); err != nil {
		t.Fatal(err)
	}
	root, err := openArtifacts(local)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f, err := openRegular(root, "f")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
