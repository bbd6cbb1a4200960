-- Revision 18 of v4: the edits of an issue found by its key. A new edit of an issue is based on
-- the wanted value of an earlier edit of the same field that no refresh has read since (the
-- hub's own write is no conflict); enqueueing looks those up by `params.key`, which without
-- this index reads every command.
-- Written so that running it twice changes nothing.
CREATE INDEX IF NOT EXISTS command_edit_key ON command (json_extract(params, '$.key'))
    WHERE type = 'ensure_issue';
