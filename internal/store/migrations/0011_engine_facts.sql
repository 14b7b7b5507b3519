-- What a Manager learnt of the engine and every later one may take as known
-- for a while, instead of learning it again at a cost: today only that the
-- engine refuses the init's oom_score_adj -1000 (each new Manager's first
-- start failed for it, half a second on a VM). observed is Unix milliseconds.
CREATE TABLE IF NOT EXISTS engine_facts (
	name     TEXT PRIMARY KEY,
	value    TEXT NOT NULL,
	observed INTEGER NOT NULL
);
