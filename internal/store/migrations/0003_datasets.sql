-- Dataset cache: which blob holds the bytes fetched for a dataset id, written
-- by the datasets package. One row per id, shared by every session and
-- namespace, so a dataset fetched once is not fetched again. The content is
-- the blob named sha256 in the blobstore. Fetched is RFC 3339 UTC text with
-- nine fractional digits, like every time in this file.
CREATE TABLE dataset_cache (
	id      TEXT    PRIMARY KEY, -- the id the fetch function was given
	sha256  TEXT    NOT NULL,    -- 64 lowercase hex digits
	size    INTEGER NOT NULL,
	fetched TEXT    NOT NULL
);

-- The blobstore's garbage collector asks whether any row still names a blob.
CREATE INDEX dataset_cache_sha256 ON dataset_cache (sha256);

-- Dataset status: what became of each dataset a session selected, so the
-- agent can be told after a restart too. Name is the file name under
-- /session/data; reason says why a load FAILED.
CREATE TABLE dataset_status (
	namespace  TEXT    NOT NULL,
	session_id TEXT    NOT NULL,
	dataset_id TEXT    NOT NULL,
	name       TEXT    NOT NULL DEFAULT '',
	status     TEXT    NOT NULL CHECK (status IN ('PENDING', 'LOADED', 'FAILED')),
	reason     TEXT    NOT NULL DEFAULT '',
	sha256     TEXT    NOT NULL DEFAULT '',
	size       INTEGER NOT NULL DEFAULT 0,
	updated    TEXT    NOT NULL,
	PRIMARY KEY (namespace, session_id, dataset_id)
);
