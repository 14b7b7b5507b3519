-- Session lifetimes: when a session expires (its time to live, extended by
-- renewals) and whether it is paused, kept here so that every process
-- sharing the database sees them (a container's labels cannot change).
-- Both are Unix milliseconds; 0 means no expiry, not paused.
ALTER TABLE sessions ADD COLUMN expires INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN paused  INTEGER NOT NULL DEFAULT 0;
