-- Revision 4 of schema v4 (PRAGMA user_version = 4): retries and refresh progress.
-- An attempt of a command that ended failed or skipped and was then queued again by an operator
-- (POST /commands/{id}/retry, /batches/{id}/retry-failed): the command row starts afresh, its
-- earlier outcome stays here. `deliveries` is the command's delivery count when it was retried
-- (the count itself goes on across attempts).
CREATE TABLE command_attempt (
    id                INTEGER PRIMARY KEY,
    command_id        INTEGER NOT NULL REFERENCES command (id),
    status            TEXT NOT NULL,             -- failed | skipped
    deliveries        INTEGER NOT NULL,
    claimed_at        TEXT,
    claimed_by        TEXT,
    finished_at       TEXT,
    agent_finished_at TEXT,
    result            TEXT,                      -- JSON
    error             TEXT,
    retried_at        TEXT NOT NULL
);
CREATE INDEX command_attempt_command ON command_attempt (command_id);
-- A refresh's progress while it runs: pages received and Jira's total when it gave one (Cloud's
-- search does not).
ALTER TABLE sync_run ADD COLUMN pages INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sync_run ADD COLUMN total INTEGER;
