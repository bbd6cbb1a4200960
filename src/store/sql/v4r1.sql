-- Revision 1 of schema v4 (PRAGMA user_version = 1): additive columns and an index.
-- When the lease of a claimed command was last renewed (its claim, or any result, a progress
-- page included); claimed_at stays the time of the last delivery, as the data model says.
ALTER TABLE command ADD COLUMN lease_at TEXT;
-- The finishing time the agent reported, converted to UTC; shown only: the hub's own clock
-- writes finished_at, so a command never looks finished before it was claimed.
ALTER TABLE command ADD COLUMN agent_finished_at TEXT;
-- The agent that claimed the command last.
ALTER TABLE command ADD COLUMN claimed_by TEXT;
-- 1 when the run's query was the base JQL when the run started, else 0.
ALTER TABLE sync_run ADD COLUMN full INTEGER NOT NULL DEFAULT 0;
UPDATE command SET lease_at = claimed_at WHERE status = 'claimed';
CREATE INDEX command_depends_on ON command (depends_on);
