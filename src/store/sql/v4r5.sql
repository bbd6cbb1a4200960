-- Revision 5 of schema v4 (PRAGMA user_version = 5): an index for the console's overview.
-- Finished commands by finishing time, with what its charts add up: commands finished per hour
-- and Jira's rate limiting over the last days come from the index alone, not a scan of every
-- command (its params, results and errors included).
CREATE INDEX command_finished ON command (finished_at, rate_limited, pause_seconds)
    WHERE finished_at IS NOT NULL;
