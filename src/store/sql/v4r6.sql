-- Revision 6 of schema v4 (PRAGMA user_version = 6): two indexes no query reads.
-- issue_link_jira_id: links are looked up by their ends and type, never by Jira id.
-- issue_mirror_changed_at: `updated_since` is applied to a project's rows once they are read, and
-- the answer's ETag is a hash of its body; no query filters or sorts the mirror by it.
-- Every ingested issue wrote both (one entry for the issue, one for each of its links).
DROP INDEX IF EXISTS issue_link_jira_id;
DROP INDEX IF EXISTS issue_mirror_changed_at;
