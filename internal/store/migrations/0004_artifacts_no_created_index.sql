-- An execution that makes files inserts a row per file into artifacts while
-- its caller waits, and each index costs about a fifth of an insert. Only
-- retention (Index.Prune, run by `artifact-server gc`) selects by created,
-- and it can afford to scan the table.
DROP INDEX IF EXISTS artifacts_created;
