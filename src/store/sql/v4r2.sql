-- Revision 2 of schema v4 (PRAGMA user_version = 2): incremental refreshes.
-- What the run asked Jira for, fixed when it starts: 'full' (the base JQL), 'incremental' (a
-- scope's JQL AND updated >= <epoch ms>), 'partial' (anything else). `full` stays, equal to
-- kind = 'full', for tools that read revision 1.
ALTER TABLE sync_run ADD COLUMN kind TEXT NOT NULL DEFAULT 'partial';
-- The run's scope: its query without the incremental clause (the query itself otherwise).
ALTER TABLE sync_run ADD COLUMN scope TEXT NOT NULL DEFAULT '';
UPDATE sync_run SET kind = CASE WHEN full = 1 THEN 'full' ELSE 'partial' END, scope = query;
CREATE INDEX sync_run_scope ON sync_run (scope, status);
-- When the issue's stored content last changed in the mirror (inserted, other fields, moved);
-- synced_at is when a refresh last brought it, changed or not. The rows already there keep NULL,
-- read as their synced_at (the hub reads COALESCE(mirror_changed_at, synced_at), and the first
-- upsert that keeps such a row's content stores that value): filling it here would rewrite every
-- row of the largest table, the whole database, inside the migration.
ALTER TABLE issue ADD COLUMN mirror_changed_at TEXT;
CREATE INDEX issue_mirror_changed_at ON issue (mirror_changed_at);
