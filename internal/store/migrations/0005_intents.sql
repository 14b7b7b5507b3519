-- An execution is written here before its code reaches the kernel, so that
-- its id has only three honest answers, in any process, until retention
-- removes it: the recorded result (a row in executions), still running (an
-- open intent), or lost (an intent whose outcome will never be known). The
-- row stays once the result is recorded: its primary key is what keeps a
-- second process from running the same id again.
CREATE TABLE intents (
	namespace    TEXT NOT NULL,
	session_id   TEXT NOT NULL,
	exec_id      TEXT NOT NULL,
	session_key  TEXT NOT NULL,
	code_sha256  TEXT NOT NULL,
	code         TEXT NOT NULL, -- capped like executions.code: what a recovered result is recorded with
	container_id TEXT NOT NULL,
	owner        TEXT NOT NULL, -- the manager that sent it (session's owner lock)
	started      TEXT NOT NULL,
	lost         TEXT, -- NULL while the outcome may still come; why it never will otherwise
	PRIMARY KEY (namespace, session_id, exec_id)
) WITHOUT ROWID;
