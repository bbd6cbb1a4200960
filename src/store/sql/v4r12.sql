-- Revision 12 of v4: how often each agent said it sends a heartbeat, in seconds; NULL
-- for an agent that never said (an older agent). The hub flags an agent silent after two such
-- periods without a request of its own, and after a fixed threshold when it is NULL.
-- Written so that running it twice changes nothing.
ALTER TABLE agent_status ADD COLUMN heartbeat_seconds INTEGER;
