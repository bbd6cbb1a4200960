-- Revision 15 of v4 (a versioned agent protocol): why a queued command waits for another agent
-- (`command.withheld`: the words shown, NULL when it does not), set by a claim that passed it
-- over because its agent cannot honour it (an edit with a base to an agent that does not check
-- bases), cleared when an agent that can claims it; and what each agent said of itself with its
-- last claim or heartbeat (`agent_status.peer`: {"protocol", "capabilities", "commit"} as JSON,
-- NULL for an agent of the previous release, which says nothing).
-- Written so that running it twice changes nothing.
ALTER TABLE command ADD COLUMN withheld TEXT;
ALTER TABLE agent_status ADD COLUMN peer TEXT;
