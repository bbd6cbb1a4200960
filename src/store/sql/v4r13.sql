-- Revision 13 of v4: the budget of a command's uncounted give-backs. How many
-- times in a row its agent gave it back with `sent: false` (nothing of the delivery reached
-- Jira, so the delivery was not counted), and since when (the hub's time of the first of them);
-- both reset by a counted delivery given back. The hub fails the command with the last reason
-- once either passes its bound.
-- Written so that running it twice changes nothing.
ALTER TABLE command ADD COLUMN uncounted_releases INTEGER NOT NULL DEFAULT 0;
ALTER TABLE command ADD COLUMN uncounted_since TEXT;
