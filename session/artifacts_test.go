package session_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/session"
)

// artifactServer serves downloads for cfg's database and blobstore, as
// artifact-server would, and points cfg's public URL at it.
func artifactServer(t *testing.T, cfg *config.Config) {
	t.Helper()
	st, err := store.Open(context.Background(), cfg.ArtifactsDB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	secret, err := artifacts.LoadOrCreateSecret(artifacts.SecretPath(cfg.ArtifactsDB))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := artifacts.NewSigner(artifacts.Keys{Current: artifacts.Key{Secret: secret}}, cfg.TokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(artifacts.NewHandler(artifacts.NewIndex(st), artifacts.NewBlobstore(cfg.BlobstoreDir), signer))
	t.Cleanup(srv.Close)
	cfg.ArtifactPublicURL = srv.URL
}

func download(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	return body
}

func byName(res *session.Result) map[string]session.Artifact {
	out := map[string]session.Artifact{}
	for _, a := range res.Artifacts {
		out[a.Name] = a
	}
	return out
}

// streamOnly is the Docker driver without its HostRoot capability, so that
// TMPFS files come through the engine's exec stream, as with a remote
// engine.
type streamOnly struct{ session.Driver }

type filesDriver interface {
	ReadFiles(ctx context.Context, id, user, dir string, names []string, fn func(name string, r io.Reader) error) error
	RemoveFile(ctx context.Context, id, user, path string) error
	WriteFile(ctx context.Context, id, user, path string, r io.Reader) error
}

func (d streamOnly) WriteFile(ctx context.Context, id, user, path string, r io.Reader) error {
	return d.Driver.(filesDriver).WriteFile(ctx, id, user, path, r)
}

func (d streamOnly) ReadFiles(ctx context.Context, id, user, dir string, names []string, fn func(name string, r io.Reader) error) error {
	return d.Driver.(filesDriver).ReadFiles(ctx, id, user, dir, names, fn)
}

func (d streamOnly) RemoveFile(ctx context.Context, id, user, path string) error {
	return d.Driver.(filesDriver).RemoveFile(ctx, id, user, path)
}

// TestArtifactsIngested: files the code writes under /session/artifacts
// come back in the result with a URL that downloads the same bytes; files
// left unchanged are not ingested again; changed ones are. TMPFS files are
// read through /proc/<pid>/root when the engine is local, else through the
// engine ("stream").
func TestArtifactsIngested(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"TMPFS", "BIND", "stream"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			storage := config.StorageTMPFS
			if mode == "BIND" {
				storage = config.StorageBind
			}
			cfg := testConfig(t, func(c *config.Config) { c.SessionStorage = storage })
			artifactServer(t, &cfg)
			var opts []session.Option
			if mode == "stream" {
				d, closer, err := session.NewDockerDriver()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { closer.Close() })
				opts = append(opts, session.WithDriver(streamOnly{d}))
			}
			m := managerFor(t, cfg, namespace(), opts...)
			mustExec(t, m, "a", "import os\nos.makedirs('/session/artifacts/sub dir', exist_ok=True)\nbefore = 1")
			res := mustExec(t, m, "a", `
open('/session/artifacts/report.csv', 'w').write('x,y\n1,2\n')
open('/session/artifacts/sub dir/naïve "name".txt', 'w').write('hello')`)
			got := byName(res)
			csv, ok := got["report.csv"]
			if !ok || len(res.Artifacts) != 2 {
				t.Fatalf("artifacts: %+v (skipped %+v)", res.Artifacts, res.SkippedArtifacts)
			}
			sum := sha256.Sum256([]byte("x,y\n1,2\n"))
			if csv.SHA256 != hex.EncodeToString(sum[:]) || csv.Size != 8 || !strings.HasPrefix(csv.MIME, "text/csv") {
				t.Fatalf("report.csv: %+v", csv)
			}
			if body := download(t, csv.URL); string(body) != "x,y\n1,2\n" {
				t.Fatalf("downloaded %q", body)
			}
			if body := download(t, got[`sub dir/naïve "name".txt`].URL); string(body) != "hello" {
				t.Fatalf("downloaded %q", body)
			}
			if res := mustExec(t, m, "a", "x = 1"); len(res.Artifacts) != 0 {
				t.Fatalf("unchanged files ingested again: %+v", res.Artifacts)
			}
			if list, err := m.Artifacts(context.Background(), "a"); err != nil || len(list) != 2 || list[0].URL == "" {
				t.Fatalf("Artifacts: %+v %v", list, err)
			}
			res = mustExec(t, m, "a", "open('/session/artifacts/report.csv', 'a').write('3,4\\n')")
			if len(res.Artifacts) != 1 || res.Artifacts[0].Name != "report.csv" || res.Artifacts[0].Size != 12 {
				t.Fatalf("changed file: %+v", res.Artifacts)
			}
		})
	}
}

// TestArtifactLinksNotFollowed: a symbolic link the code makes (to the
// host's /etc/passwd as seen from a BIND folder, or to a folder) is reported,
// never read.
func TestArtifactLinksNotFollowed(t *testing.T) {
	t.Parallel()
	for _, storage := range []config.Storage{config.StorageBind, config.StorageTMPFS} {
		t.Run(string(storage), func(t *testing.T) {
			t.Parallel()
			testLinksNotFollowed(t, storage)
		})
	}
}

func testLinksNotFollowed(t *testing.T, storage config.Storage) {
	cfg := testConfig(t, func(c *config.Config) { c.SessionStorage = storage })
	m := managerFor(t, cfg, namespace())
	res := mustExec(t, m, "l", `
import os
os.makedirs('/session/artifacts', exist_ok=True)
os.symlink('/etc/passwd', '/session/artifacts/passwd')
os.symlink('/etc', '/session/artifacts/etc')
os.symlink('../../../../../../etc/shadow', '/session/artifacts/shadow')`)
	if len(res.Artifacts) != 0 {
		t.Fatalf("a link was ingested: %+v", res.Artifacts)
	}
	skipped := map[string]string{}
	for _, s := range res.SkippedArtifacts {
		skipped[s.Name] = s.Reason
	}
	for _, name := range []string{"passwd", "etc", "shadow"} {
		if !strings.Contains(skipped[name], "symbolic link") {
			t.Errorf("%s: skipped %q, want a symbolic-link reason", name, skipped[name])
		}
	}
}

// TestArtifactsFolderLink: the code replaces /session/artifacts itself with
// a link to a folder that exists on the host too. Followed on the host, the
// link would ingest the host's file, and ARTIFACT_MOVE would delete it.
func TestArtifactsFolderLink(t *testing.T) {
	t.Parallel()
	for _, storage := range []config.Storage{config.StorageBind, config.StorageTMPFS} {
		t.Run(string(storage), func(t *testing.T) {
			t.Parallel()
			canary := t.TempDir() // under /tmp, which the sandbox can write too
			secret := filepath.Join(canary, "secret")
			if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			m := newManager(t, func(c *config.Config) {
				c.SessionStorage = storage
				c.ArtifactMove = true
			})
			res := mustExec(t, m, "link", fmt.Sprintf(`
import os, shutil
shutil.rmtree('/session/artifacts', ignore_errors=True)
os.makedirs(%[1]q, exist_ok=True)
open(%[1]q + '/secret', 'w').write('sandbox')
os.symlink(%[1]q, '/session/artifacts')`, canary))
			if len(res.Artifacts) != 0 {
				t.Errorf("ingested through the link: %+v", res.Artifacts)
			}
			if len(res.SkippedArtifacts) != 1 || res.SkippedArtifacts[0].Name != "." ||
				!strings.Contains(res.SkippedArtifacts[0].Reason, "symbolic link") {
				t.Errorf("skipped %+v, want the folder reported as a link", res.SkippedArtifacts)
			}
			if got, err := os.ReadFile(secret); err != nil || string(got) != "host secret" {
				t.Errorf("host file: %q, %v", got, err)
			}
		})
	}
}

func TestArtifactLimits(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) {
		c.ArtifactMaxFiles = 3
		c.ArtifactMaxFileMB = 1
	})
	res := mustExec(t, m, "lim", `
import os
os.makedirs('/session/artifacts', exist_ok=True)
for name in ('a', 'b', 'c', 'd'):
    open('/session/artifacts/' + name, 'w').write(name)
open('/session/artifacts/big.bin', 'wb').write(b'0' * (2 << 20))`)
	if len(res.Artifacts) != 3 {
		t.Fatalf("want 3 artifacts (ARTIFACT_MAX_FILES), got %+v", res.Artifacts)
	}
	reasons := map[string]string{}
	for _, s := range res.SkippedArtifacts {
		reasons[s.Name] = s.Reason
	}
	if !strings.Contains(reasons["big.bin"], "ARTIFACT_MAX_FILE_MB") {
		t.Errorf("big.bin: %q", reasons["big.bin"])
	}
	if !strings.Contains(reasons["d"], "ARTIFACT_MAX_FILES") || len(reasons) != 2 {
		t.Errorf("skipped: %+v", res.SkippedArtifacts)
	}
}

func TestFiguresAndMoveMode(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.ArtifactMove = true })
	res := mustExec(t, m, "fig", `
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
open('/session/artifacts/out.txt', 'w').write('moved') if __import__('os').makedirs('/session/artifacts', exist_ok=True) is None else None`)
	got := byName(res)
	if a, ok := got["figures/cell-1-1.png"]; !ok || a.MIME != "image/png" {
		t.Fatalf("figure not stored: %+v %+v", res.Artifacts, res.SkippedArtifacts)
	}
	if _, ok := got["out.txt"]; !ok {
		t.Fatalf("out.txt not stored: %+v", res.Artifacts)
	}
	res = mustExec(t, m, "fig", "import os\nprint(os.listdir('/session/artifacts'))")
	if strings.TrimSpace(res.Stdout) != "[]" {
		t.Fatalf("ARTIFACT_MOVE left files: %q", res.Stdout)
	}
}

func TestArtifactSessionCap(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *config.Config) { c.ArtifactMaxSessionMB = 1 })
	write := "import os\nos.makedirs('/session/artifacts', exist_ok=True)\nopen('/session/artifacts/%s', 'wb').write(os.urandom(700 << 10))"
	if res := mustExec(t, m, "cap", strings.Replace(write, "%s", "one", 1)); len(res.Artifacts) != 1 {
		t.Fatalf("first file: %+v %+v", res.Artifacts, res.SkippedArtifacts)
	}
	res := mustExec(t, m, "cap", strings.Replace(write, "%s", "two", 1))
	if len(res.Artifacts) != 0 || len(res.SkippedArtifacts) != 1 || !strings.Contains(res.SkippedArtifacts[0].Reason, "ARTIFACT_MAX_SESSION_MB") {
		t.Fatalf("second file past the session cap: %+v %+v", res.Artifacts, res.SkippedArtifacts)
	}
}
