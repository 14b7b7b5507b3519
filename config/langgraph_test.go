package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
)

// clearLangGraphEnv is clearEnv for LangGraph-Sandbox's names too.
func clearLangGraphEnv(t *testing.T) {
	t.Helper()
	clearEnv(t)
	for _, v := range config.LangGraphVars() {
		t.Setenv(v.Name, "")
		if err := os.Unsetenv(v.Name); err != nil {
			t.Fatal(err)
		}
	}
}

// langGraphDir copies testdata/langgraph/<name> into <tmp>/app/example,
// with <tmp>/example_llm_data (fully_local.env's ../../example_llm_data)
// and <tmp>/app/example/heavy_llm_data made, moves there and returns
// <tmp>.
func langGraphDir(t *testing.T, name, extra string) string {
	t.Helper()
	clearLangGraphEnv(t)
	root := t.TempDir()
	dir := filepath.Join(root, "app", "example")
	for _, d := range []string{dir, filepath.Join(root, "example_llm_data"), filepath.Join(dir, "heavy_llm_data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join("testdata", "langgraph", name))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, name, string(data)+extra)
	t.Chdir(dir)
	return root
}

// TestLangGraphEnvFiles: LangGraph-Sandbox's four .env files start agentbox
// with the meaning they have there (issue 24 row 7): its image name runs
// ours, every variable it reads is honoured or named in a note, and
// nothing is weakened (its Docker network settings do not give sessions a
// network).
func TestLangGraphEnvFiles(t *testing.T) {
	tests := []struct {
		file    string
		storage config.Storage
		access  config.DatasetAccess
		tmpfs   int
		blobs   string
		db      string
		hostRO  string // relative to the temporary root; "" for none
		notes   []string
	}{
		{"sandbox.env", config.StorageTMPFS, config.AccessAPI, 1024, "blobstore", "artifacts.db", "",
			[]string{"SANDBOX_IMAGE=sandbox:latest", "SANDBOX_ADDRESS_STRATEGY", "COMPOSE_NETWORK", "HOST_GATEWAY", "SANDBOX_NETWORK", "IN_CHAT_URL"}},
		{"simple_sandbox.env", config.StorageTMPFS, config.AccessNone, 4096, "simple_blobstore", "simple_artifacts.db", "",
			[]string{"SANDBOX_IMAGE=sandbox:latest"}},
		{"tmpfs_api.env", config.StorageTMPFS, config.AccessAPI, 1024, "tmpfs_api_blobstore", "tmpfs_api_artifacts.db", "",
			[]string{"SANDBOX_IMAGE=sandbox:latest"}},
		{"fully_local.env", config.StorageBind, config.AccessLocalRO, 1024, "example1_blobstore", "example1_artifacts.db", "example_llm_data",
			[]string{"SANDBOX_IMAGE=sandbox:latest"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			root := langGraphDir(t, tt.file, "")
			dir := filepath.Join(root, "app", "example")
			c, err := config.LoadFile(tt.file)
			if err != nil {
				t.Fatalf("load %s: %v", tt.file, err)
			}
			if c.SandboxImage != "agentbox-sandbox:latest" {
				t.Errorf("SandboxImage = %q, want agentbox-sandbox:latest (sandbox:latest is LangGraph-Sandbox's name for its sandbox image)", c.SandboxImage)
			}
			if c.SessionStorage != tt.storage || c.DatasetAccess != tt.access || c.TmpfsSizeMB != tt.tmpfs {
				t.Errorf("storage %s, access %s, tmpfs %d; want %s, %s, %d", c.SessionStorage, c.DatasetAccess, c.TmpfsSizeMB, tt.storage, tt.access, tt.tmpfs)
			}
			if c.SessionsRoot != filepath.Join(dir, "sessions") || c.BlobstoreDir != filepath.Join(dir, tt.blobs) || c.ArtifactsDB != filepath.Join(dir, tt.db) {
				t.Errorf("paths %s, %s, %s", c.SessionsRoot, c.BlobstoreDir, c.ArtifactsDB)
			}
			if want := ""; tt.hostRO != "" {
				want = filepath.Join(root, tt.hostRO)
				if c.DatasetsHostRO != want {
					t.Errorf("DatasetsHostRO = %q, want %q", c.DatasetsHostRO, want)
				}
			}
			if c.Network != "none" {
				t.Errorf("Network = %q: LangGraph-Sandbox's network settings must not give sessions a network", c.Network)
			}
			notes := strings.Join(c.Notes, "\n")
			for _, want := range tt.notes {
				if !strings.Contains(notes, want) {
					t.Errorf("notes do not name %s:\n%s", want, notes)
				}
			}
			if strings.Contains(notes, "OPENAI_API_KEY") || strings.Contains(notes, "__FILL_ME__") {
				t.Errorf("notes speak of the model's key, which is not a sandbox setting:\n%s", notes)
			}
		})
	}

	// LangGraph-Sandbox reads sandbox.env from the working directory when
	// it is given no file; so does Load, under .env.
	t.Run("Load reads sandbox.env", func(t *testing.T) {
		langGraphDir(t, "sandbox.env", "")
		c, err := config.Load()
		if err != nil {
			t.Fatal(err)
		}
		if c.DatasetAccess != config.AccessAPI || c.SandboxImage != "agentbox-sandbox:latest" {
			t.Errorf("Load without .env: access %s, image %s: sandbox.env not read", c.DatasetAccess, c.SandboxImage)
		}
		writeFile(t, ".", ".env", "DATASET_ACCESS=NONE\n")
		if c, err = config.Load(); err != nil || c.DatasetAccess != config.AccessNone {
			t.Errorf("Load with .env: access %s, %v: .env must win over sandbox.env", c.DatasetAccess, err)
		}
	})
}

// TestLangGraphNames: the variables LangGraph-Sandbox reads under other
// names than agentbox's are honoured under its names.
func TestLangGraphNames(t *testing.T) {
	t.Run("artifacts service", func(t *testing.T) {
		langGraphDir(t, "sandbox.env", "ARTIFACTS_PUBLIC_BASE_URL=https://files.example:9000/\nARTIFACTS_TOKEN_TTL_SECONDS=86400\n"+
			"ARTIFACTS_SECRET=0123456789abcdef0123456789abcdef\nMAX_ARTIFACT_SIZE_MB=50\nARTIFACTS_DB_PATH=./artifacts.db\nCACHE_FILENAME=cache_datasets.json\n")
		c, err := config.LoadFile("sandbox.env")
		if err != nil {
			t.Fatal(err)
		}
		if c.ArtifactPublicURL != "https://files.example:9000" || c.TokenTTL != 24*time.Hour ||
			c.TokenSecret != "0123456789abcdef0123456789abcdef" || c.ArtifactMaxFileMB != 50 {
			t.Errorf("public URL %q, TTL %s, secret set %v, max file %d MiB", c.ArtifactPublicURL, c.TokenTTL, c.TokenSecret != "", c.ArtifactMaxFileMB)
		}
	})
	t.Run("server port", func(t *testing.T) {
		langGraphDir(t, "tmpfs_api.env", "ARTIFACTS_SERVER_PORT=8002\n")
		c, err := config.LoadFile("tmpfs_api.env")
		if err != nil {
			t.Fatal(err)
		}
		if c.ArtifactServerAddr != ":8002" || c.ArtifactPublicURL != "http://localhost:8002" {
			t.Errorf("addr %q, public URL %q; want :8002 and http://localhost:8002", c.ArtifactServerAddr, c.ArtifactPublicURL)
		}
	})
	t.Run("hybrid", func(t *testing.T) {
		root := langGraphDir(t, "tmpfs_api.env", "DATASET_ACCESS=HYBRID\nHYBRID_LOCAL_PATH=./heavy_llm_data\n")
		c, err := config.LoadFile("tmpfs_api.env")
		if err != nil {
			t.Fatalf("HYBRID with HYBRID_LOCAL_PATH: %v", err)
		}
		if want := filepath.Join(root, "app", "example", "heavy_llm_data"); c.DatasetAccess != config.AccessHybrid || c.DatasetsHostRO != want {
			t.Errorf("access %s, DatasetsHostRO %q; want HYBRID, %q", c.DatasetAccess, c.DatasetsHostRO, want)
		}
	})
	t.Run("default access is API", func(t *testing.T) {
		clearLangGraphEnv(t)
		c, err := config.FromLookup(nil)
		if err != nil || c.DatasetAccess != config.AccessAPI {
			t.Errorf("default DATASET_ACCESS = %s (%v), want API as LangGraph-Sandbox's", c.DatasetAccess, err)
		}
	})

	for _, tt := range []struct {
		name string
		env  map[string]string
		bad  string   // the variable the error names
		want []string // in its message
	}{
		{"both names, two values", map[string]string{"ARTIFACTS_PUBLIC_BASE_URL": "http://a.example", "ARTIFACT_PUBLIC_URL": "http://b.example"},
			"ARTIFACTS_PUBLIC_BASE_URL", []string{"ARTIFACT_PUBLIC_URL"}},
		{"bad value under its name", map[string]string{"ARTIFACTS_TOKEN_TTL_SECONDS": "lots"},
			"ARTIFACTS_TOKEN_TTL_SECONDS", []string{"ARTIFACT_TOKEN_TTL_S", "lots"}},
		{"short secret", map[string]string{"ARTIFACTS_SECRET": "fixed_artifact_secret"},
			"ARTIFACTS_SECRET", []string{"ARTIFACT_TOKEN_SECRET", "32 characters"}},
		{"two secrets", map[string]string{"ARTIFACTS_SECRET": "fixed_artifact_secret", "ARTIFACT_TOKEN_SECRET": "0123456789abcdef0123456789abcdef"},
			"ARTIFACTS_SECRET", []string{"ARTIFACT_TOKEN_SECRET", "redacted"}},
		{"other cache file", map[string]string{"CACHE_FILENAME": "mine.json"},
			"CACHE_FILENAME", []string{"cache_datasets.json"}},
		{"hybrid without its folder", map[string]string{"DATASET_ACCESS": "HYBRID"},
			"DATASETS_HOST_RO", []string{"HYBRID_LOCAL_PATH"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearLangGraphEnv(t)
			_, err := config.FromLookup(env(tt.env))
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			var named *config.VarError
			for _, ve := range varErrors(t, err) {
				if ve.Name == tt.bad {
					named = ve
				}
			}
			if named == nil {
				t.Fatalf("err = %v, want one naming %s", err, tt.bad)
			}
			for _, w := range tt.want {
				if !strings.Contains(named.Error(), w) {
					t.Errorf("%q does not say %q", named.Error(), w)
				}
			}
			if strings.Contains(err.Error(), "fixed_artifact_secret") {
				t.Errorf("the secret is echoed: %v", err)
			}
		})
	}
}
