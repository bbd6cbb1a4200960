-- Revision 11 of v4: since when each agent has said Jira is held for it (its
-- credentials refused, Jira not reachable): set by the first heartbeat with `jira_ok: false`,
-- kept while they go on, cleared by one with `jira_ok: true`; NULL otherwise.
-- Written so that running it twice changes nothing.
ALTER TABLE agent_status ADD COLUMN jira_down_since TEXT;
