-- Indexes of issue 12 (performance), additive and idempotent. Not yet a numbered revision of v4:
-- Store::open applies this file on every writable open until it is given a revision number.
-- The queued commands by batch and seq: the claim walk finds the oldest queued batch and the
-- next commands of a batch without reading or sorting the rest of the queue.
CREATE INDEX IF NOT EXISTS command_queued ON command (batch_id, seq) WHERE status = 'queued';
