package artifacts

import (
	"errors"
	"time"
)

// Artifact is one file a session's code wrote under /session/artifacts,
// stored by content.
type Artifact struct {
	ID         string    // random, unguessable; the download URL's name for it
	Namespace  string    // the session manager's namespace
	SessionID  string    // session.ID of the key
	SessionKey string    //
	Name       string    // path relative to /session/artifacts, slash-separated
	SHA256     string    // hex; the blob's name in the blobstore and the ETag
	Size       int64     // bytes
	MIME       string    // from the content and the extension
	Created    time.Time // when it was ingested
}

var (
	// ErrNotFound means no artifact has the id (or name).
	ErrNotFound = errors.New("artifact not found")
	// ErrBlobMissing means the index knows the artifact but its content is
	// gone from the blobstore.
	ErrBlobMissing = errors.New("artifact content missing from the blobstore")
)
