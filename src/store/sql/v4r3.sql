-- Revision 3 of schema v4 (PRAGMA user_version = 3): an index for the claim walk.
-- The queued commands by batch and seq: the claim walk finds the oldest queued batch and the
-- next commands of a batch without reading or sorting the rest of the queue.
CREATE INDEX command_queued ON command (batch_id, seq) WHERE status = 'queued';
