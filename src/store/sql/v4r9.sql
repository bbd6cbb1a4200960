-- Revision 9 of v4: the last preflight (`jira-hub agent --check`) each agent sent
-- with a heartbeat, as JSON `{ran_at, ok, lines: [{name, ok, detail}]}`; NULL until one came.
-- Written so that running it twice changes nothing.
ALTER TABLE agent_status ADD COLUMN last_check TEXT;
