// Package artifacts stores the files sessions write under
// /session/artifacts: a content-addressed blobstore (BLOBSTORE_DIR/ab/cd/<sha256>,
// identical content stored once), an index in the SQLite database shared with
// the session history (ARTIFACTS_DB), short-lived signed download tokens, and
// the http.Handler that serves downloads.
//
// A program serves downloads from its own HTTP server with Open, which
// builds the Handler from the config.Config its session.Manager uses (the
// same database, blobstore and token secret), so the URLs the Manager hands
// out work there; Handler.Close closes the database. NewHandler builds one
// over any ArtifactGetter and BlobOpener, fakes included.
package artifacts
