-- Sessions: one row per session the manager knows, running or stopped.
-- Times are RFC 3339 UTC text with nine fractional digits, so they sort as text.
CREATE TABLE sessions (
	namespace       TEXT    NOT NULL,
	id              TEXT    NOT NULL,
	key             TEXT    NOT NULL,
	container_id    TEXT    NOT NULL DEFAULT '',
	image           TEXT    NOT NULL DEFAULT '',
	storage         TEXT    NOT NULL DEFAULT '',
	created         TEXT    NOT NULL,
	last_used       TEXT    NOT NULL,
	execution_count INTEGER NOT NULL DEFAULT 0,
	stopped         TEXT    NOT NULL DEFAULT '', -- '' while running
	stop_reason     TEXT    NOT NULL DEFAULT '',
	limits          TEXT    NOT NULL DEFAULT '{}', -- JSON object
	PRIMARY KEY (namespace, id)
);

CREATE INDEX sessions_last_used ON sessions (namespace, last_used);

-- Executions: the history of every session, in the order recorded. It has no
-- foreign key to sessions on purpose: history outlives session rows.
CREATE TABLE executions (
	seq              INTEGER PRIMARY KEY AUTOINCREMENT,
	namespace        TEXT    NOT NULL,
	session_id       TEXT    NOT NULL,
	session_key      TEXT    NOT NULL,
	exec_id          TEXT    NOT NULL,
	execution_count  INTEGER NOT NULL,
	code             TEXT    NOT NULL,
	stdout           TEXT    NOT NULL,
	stderr           TEXT    NOT NULL,
	outputs          TEXT    NOT NULL DEFAULT '[]', -- JSON array of kernel.Output
	error            TEXT,                          -- JSON kernel.Exception, NULL when none
	started          TEXT    NOT NULL,
	duration_ns      INTEGER NOT NULL,
	timed_out        INTEGER NOT NULL DEFAULT 0,
	interrupted      INTEGER NOT NULL DEFAULT 0,
	kernel_restarted INTEGER NOT NULL DEFAULT 0,
	state_lost       INTEGER NOT NULL DEFAULT 0,
	replayed         INTEGER NOT NULL DEFAULT 0,
	artifacts        TEXT    NOT NULL DEFAULT '[]' -- opaque JSON array
);

CREATE INDEX executions_session_seq ON executions (namespace, session_id, seq);
CREATE INDEX executions_session_exec ON executions (namespace, session_id, exec_id);
