package session_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
)

// TestBindDiskMoveFollowsNoLink: the host moves a workspace folder's files
// onto a disk that already has files (a key whose disk existed while
// another program, or this one with SESSION_DISK_MB=0, ran it on the bare
// folder). Both trees are the sandbox's: a link it left on the disk where
// its bare folder has a file of the same name must not make the host's
// copy (root) write that file through the link, anywhere on the host.
func TestBindDiskMoveFollowsNoLink(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, bindDisk(32))
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("host file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := managerFor(t, cfg, namespace())
	// On its disk, the sandbox leaves a link to a host path.
	mustExec(t, m, "k", "import os\nos.symlink("+pyQuote(victim)+", '/session/evil')")
	if err := m.Stop(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(cfg.SessionsRoot, session.ID("k"), session.WorkspaceDir)
	deadline := time.Now().Add(30 * time.Second)
	for len(hostMounts(t, ws)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the disk is still mounted 30 s after the stop")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Another program sharing SESSIONS_ROOT runs the key on the bare
	// folder (no disk limit there): the sandbox writes a file of the
	// same name.
	plainCfg := cfg
	plainCfg.SessionDiskMB = 0
	plain := managerFor(t, plainCfg, namespace())
	mustExec(t, plain, "k", "open('/session/evil', 'w').write('written by the sandbox\\n')")
	if err := plain.Stop(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	// Back on the disk: the host moves the bare folder's files onto it.
	_, err := m.Exec(context.Background(), "k", "pass")
	if got, _ := os.ReadFile(victim); string(got) != "host file\n" {
		t.Fatalf("the move wrote through the sandbox's link: the host file now holds %q (exec: %v)", got, err)
	}
}

func pyQuote(s string) string { return "'" + s + "'" }
