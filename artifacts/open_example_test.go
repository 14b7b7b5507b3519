package artifacts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
)

// ExampleOpen serves artifact downloads from a program's own HTTP server,
// under /files/, next to its other routes. The configuration is the one the
// program's session.Manager uses, so the Handler accepts the download URLs
// the Manager hands out (ARTIFACT_PUBLIC_URL says where they point).
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "artifacts-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := config.Default() // in a program: config.Load()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.TokenSecret = strings.Repeat("s", 32)

	ctx := context.Background()
	downloads, err := artifacts.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer downloads.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /chat", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "the chat UI") })
	mux.Handle("/files/", http.StripPrefix("/files", downloads))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cfg.ArtifactPublicURL = srv.URL + "/files" // what the Manager builds URLs on

	get := func(path string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if head, token, ok := strings.Cut(path, "?token="); ok && len(token) > 20 {
			path = head + "?token=…" // a signed token, different every run
		}
		var e struct {
			Error struct{ Code string }
		}
		if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
			body = []byte(e.Error.Code + "\n")
		}
		fmt.Printf("%s %d %s", path, resp.StatusCode, body)
	}
	get("/chat")
	get("/files/healthz")
	get("/files/artifacts/au7xce6unhgysje3yyuh34w6jx")
	get("/files/artifacts/au7xce6unhgysje3yyuh34w6jx?token=forged")

	// A URL signed with the same secret passes the token check; this id
	// has no artifact behind it.
	signer, err := artifacts.NewSigner(artifacts.Keys{Current: artifacts.Key{Secret: []byte(cfg.TokenSecret)}}, cfg.TokenTTL)
	if err != nil {
		log.Fatal(err)
	}
	url, _, err := signer.URL(cfg.ArtifactPublicURL, "au7xce6unhgysje3yyuh34w6jx", time.Now())
	if err != nil {
		log.Fatal(err)
	}
	get(strings.TrimPrefix(url, srv.URL))
	// Output:
	// /chat 200 the chat UI
	// /files/healthz 200 {"status":"ok"}
	// /files/artifacts/au7xce6unhgysje3yyuh34w6jx 401 token_missing
	// /files/artifacts/au7xce6unhgysje3yyuh34w6jx?token=forged 401 token_invalid
	// /files/artifacts/au7xce6unhgysje3yyuh34w6jx?token=… 404 not_found
}
