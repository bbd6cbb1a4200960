-- Revision 8 of v4: the removals a full refresh did not apply by itself. A full run
-- that would remove more of a project's mirror than `prune_guard` allows ends `held`; its row
-- here lists the keys it would remove, until an operator confirms it (or a later full run that
-- misses the same keys does). Written so that running it twice changes nothing.
CREATE TABLE IF NOT EXISTS held_prune (
    run_id       INTEGER PRIMARY KEY REFERENCES sync_run (id),
    keys         TEXT NOT NULL,
    count        INTEGER NOT NULL,
    projects     TEXT NOT NULL,
    held_at      TEXT NOT NULL,
    confirmed_at TEXT,
    confirmed_by TEXT
);
