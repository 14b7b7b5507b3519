-- Dataset cache scopes: a cached dataset belongs to every session ('shared',
-- as before this migration), to the sessions of one namespace ('namespace'),
-- or to one session key of a namespace ('session'), as the manager's
-- DATASET_CACHE_SCOPE says, so a source that authorizes per namespace or per
-- user is asked for each. Namespace is '' when shared; session_key is ''
-- unless per session. Rows from before are shared, as they were.
CREATE TABLE dataset_cache_scoped (
	scope       TEXT    NOT NULL CHECK (scope IN ('shared', 'namespace', 'session')),
	namespace   TEXT    NOT NULL DEFAULT '',
	session_key TEXT    NOT NULL DEFAULT '',
	id          TEXT    NOT NULL, -- the id the fetch function was given
	sha256      TEXT    NOT NULL, -- 64 lowercase hex digits
	size        INTEGER NOT NULL,
	fetched     TEXT    NOT NULL,
	PRIMARY KEY (scope, namespace, session_key, id)
);

INSERT INTO dataset_cache_scoped (scope, id, sha256, size, fetched)
	SELECT 'shared', id, sha256, size, fetched FROM dataset_cache;

DROP TABLE dataset_cache;

ALTER TABLE dataset_cache_scoped RENAME TO dataset_cache;

-- The blobstore's garbage collector asks whether any row still names a blob.
CREATE INDEX dataset_cache_sha256 ON dataset_cache (sha256);
