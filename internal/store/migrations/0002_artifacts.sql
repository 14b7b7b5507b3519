-- Artifacts: one row per (session, relative name, content), written by the
-- artifacts package. The content is the blob named sha256 in the blobstore;
-- rows of many sessions may share one blob. Created is RFC 3339 UTC text with
-- nine fractional digits, like every time in this file, so it sorts as text.
CREATE TABLE artifacts (
	id          TEXT    PRIMARY KEY, -- random, unguessable: names the artifact in download URLs
	namespace   TEXT    NOT NULL,
	session_id  TEXT    NOT NULL,
	session_key TEXT    NOT NULL DEFAULT '',
	name        TEXT    NOT NULL,    -- path relative to /session/artifacts
	sha256      TEXT    NOT NULL,    -- 64 lowercase hex digits
	size        INTEGER NOT NULL,
	mime        TEXT    NOT NULL DEFAULT '',
	created     TEXT    NOT NULL     -- when last ingested
);

-- Adding the same content under the same name again finds this row instead of
-- making another; its prefix (namespace, session_id, name) serves the lookups
-- by session and by name.
CREATE UNIQUE INDEX artifacts_session_name_sha256 ON artifacts (namespace, session_id, name, sha256);
-- The garbage collector asks whether any row still names a blob.
CREATE INDEX artifacts_sha256 ON artifacts (sha256);
-- Retention deletes rows older than a time.
CREATE INDEX artifacts_created ON artifacts (created);
