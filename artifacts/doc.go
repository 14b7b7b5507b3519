// Package artifacts stores the files sessions write under
// /session/artifacts: a content-addressed blobstore (BLOBSTORE_DIR/ab/cd/<sha256>,
// identical content stored once), an index in the SQLite database shared with
// the session history (ARTIFACTS_DB), short-lived signed download tokens, and
// the http.Handler that serves downloads.
package artifacts
