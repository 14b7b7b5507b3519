package artifacts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/store"
)

// Database is an open agentbox database (the file ARTIFACTS_DB names, with
// this module's schema applied): what a session.Manager and Open open. DB
// returns its connection pool, which NewIndex reads and writes the
// artifacts table through. A program outside this module needs none: Open
// gives it a Handler, and a Manager keeps its own index.
type Database interface {
	DB() *sql.DB
}

// Open opens what a download Handler serves from, as cfg names it, and
// returns the Handler: the database ARTIFACTS_DB (created and migrated if
// needed; other processes may have it open too), the blobstore
// BLOBSTORE_DIR, and the token signer of ARTIFACT_TOKEN_SECRET or, when
// that is empty, of the secret kept next to the database (made if missing,
// as a session.Manager does). The Handler therefore accepts the download
// URLs a session.Manager with the same configuration hands out. Close the
// Handler to close the database.
//
// This is how a program serves downloads from its own HTTP server: mount
// the Handler on its mux, under a prefix with http.StripPrefix, and set
// ARTIFACT_PUBLIC_URL to where it is mounted. Open checks only the settings
// it uses, not the whole Config.
func Open(ctx context.Context, cfg config.Config, opts ...HandlerOption) (*Handler, error) {
	if cfg.ArtifactsDB == "" || cfg.BlobstoreDir == "" {
		return nil, errors.New("open artifacts: ARTIFACTS_DB and BLOBSTORE_DIR must be set")
	}
	signer, err := signerFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("open artifacts: %w", err)
	}
	db, err := store.Open(ctx, cfg.ArtifactsDB)
	if err != nil {
		return nil, fmt.Errorf("open artifacts: %w", err)
	}
	h := NewHandler(NewIndex(db), NewBlobstore(cfg.BlobstoreDir), signer, opts...)
	h.closer = db
	return h, nil
}

// Close closes the database Open opened for h; requests after it fail with
// 500 (internal). A Handler from NewHandler has nothing to close.
func (h *Handler) Close() error {
	if h.closer == nil {
		return nil
	}
	return h.closer.Close()
}

// signerFor is the Signer of cfg's tokens: ARTIFACT_TOKEN_SECRET, or the
// secret kept next to the database, with ARTIFACT_TOKEN_TTL_S.
func signerFor(cfg config.Config) (*Signer, error) {
	secret := []byte(cfg.TokenSecret)
	if len(secret) == 0 {
		var err error
		if secret, err = LoadOrCreateSecret(SecretPath(cfg.ArtifactsDB)); err != nil {
			return nil, err
		}
	}
	return NewSigner(Keys{Current: Key{Secret: secret}}, cfg.TokenTTL)
}
