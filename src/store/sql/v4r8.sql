-- Revision 8 of schema v4 (PRAGMA user_version = 8): a command its agent gave back (report
-- status `released`: a write's answer was lost, the write may still be running in Jira) is queued
-- again but not handed out before this time (the hub's clock, UTC). NULL: no such wait.
-- Added only when missing (the revision's code checks pragma_table_info first).
ALTER TABLE command ADD COLUMN not_before TEXT;
