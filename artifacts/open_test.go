package artifacts_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
)

// TestOpenServesWhatAManagerStores: an artifact stored in the database and
// blobstore a Config names, with a URL signed by the secret generated next
// to the database (what a session.Manager does), downloads through the
// Handler Open builds, mounted under a prefix of another mux.
func TestOpenServesWhatAManagerStores(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.ArtifactsDB = filepath.Join(dir, "db", "artifacts.db")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")

	// The manager's side: a blob, a row, a URL.
	st, err := store.Open(t.Context(), cfg.ArtifactsDB)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	content := "city,temp\nOslo,4\n"
	sha, size, err := artifacts.NewBlobstore(cfg.BlobstoreDir).Put(t.Context(), strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	a, err := artifacts.NewIndex(st).Add(t.Context(), artifacts.Artifact{
		Namespace: "agentbox", SessionID: "s", SessionKey: "s", Name: "temps.csv",
		SHA256: sha, Size: size, MIME: "text/csv; charset=utf-8",
	})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := artifacts.LoadOrCreateSecret(artifacts.SecretPath(cfg.ArtifactsDB))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := artifacts.NewSigner(artifacts.Keys{Current: artifacts.Key{Secret: secret}}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	// The embedder's side.
	h, err := artifacts.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/dl/", http.StripPrefix("/dl", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	url, _, err := signer.URL(srv.URL+"/dl", a.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(); code != http.StatusOK || body != content {
		t.Fatalf("download through Open's handler: %d %q, want 200 %q", code, body, content)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if code, _ := get(); code != http.StatusInternalServerError {
		t.Errorf("download after Close: %d, want 500", code)
	}
}

func TestOpenRefusesWhatItCannotUse(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		mutate func(*config.Config)
		want   string
	}{
		{"no database", func(c *config.Config) { c.ArtifactsDB = "" }, "ARTIFACTS_DB and BLOBSTORE_DIR must be set"},
		{"no blobstore", func(c *config.Config) { c.BlobstoreDir = "" }, "ARTIFACTS_DB and BLOBSTORE_DIR must be set"},
		{"short secret", func(c *config.Config) { c.TokenSecret = "short" }, "want at least 32 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
			cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
			tc.mutate(&cfg)
			h, err := artifacts.Open(t.Context(), cfg)
			if err == nil {
				h.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "open artifacts: ") {
				t.Errorf("Open: %v, want %q", err, tc.want)
			}
		})
	}
}
