-- The trace an execution or shell command ran in (32 lowercase hex
-- digits, the W3C trace id), so that a person can go from the history to
-- the trace; NULL when no sampled span was active, and for rows from before.
ALTER TABLE executions ADD COLUMN trace_id TEXT;
