-- Shell commands (session.Manager.Run) share the history with Python
-- executions: kind tells them apart, code holds the command line, and
-- exit_code the command's exit status (NULL for Python executions, whose
-- outcome is in error). Rows from before are Python executions.
ALTER TABLE executions ADD COLUMN kind TEXT NOT NULL DEFAULT 'python' CHECK (kind IN ('python', 'shell'));
ALTER TABLE executions ADD COLUMN exit_code INTEGER;
