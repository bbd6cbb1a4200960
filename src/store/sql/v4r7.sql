-- Revision 7 of schema v4 (PRAGMA user_version = 7): a command its agent gave back (report
-- status `released`: a write's answer was lost, the write may still be running in Jira) is queued
-- again but not handed out before this time (the hub's clock, UTC). NULL: no such wait.
-- Added only when missing (`apply_idempotent`).
ALTER TABLE command ADD COLUMN not_before TEXT;
