-- Revision 14 of v4: the call a command's last give-back was for, when its
-- agent gave it back because Jira refused that one path while accepting the credentials
-- (`released` with `refused`): {"method", "path", "status"} as JSON, NULL otherwise. The hub hands
-- it to the next delivery (`previous_release.refused`), so that the same refusal again fails the
-- command whichever agent, or agent run, meets it. Rewritten by every give-back.
-- Written so that running it twice changes nothing.
ALTER TABLE command ADD COLUMN released_refusal TEXT;
