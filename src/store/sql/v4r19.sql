-- Revision 19 of v4: the issues a refresh run received but could not store (a field the mapping
-- refuses). Their mirror rows keep their old content and their old `synced_at`, which other
-- readers take as "what Jira showed then"; the run's end counts them as seen by this table, not
-- by a `synced_at` that would claim a read the row does not hold. A run's rows go when it ends.
-- Written so that running it twice changes nothing.
CREATE TABLE IF NOT EXISTS sync_run_unstored (
    run_id INTEGER NOT NULL,
    key    TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
