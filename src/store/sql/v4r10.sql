-- Revision 10 of v4: a sync run knows its batch (a refresh is a batch with a
-- run, linked both ways), so `GET /sync-runs` and the console name the refresh by its batch even
-- when the command row is gone. Earlier runs are filled in from their command. Written so that
-- running it twice changes nothing.
ALTER TABLE sync_run ADD COLUMN batch_id INTEGER;
UPDATE sync_run SET batch_id = (SELECT c.batch_id FROM command c WHERE c.id = sync_run.command_id) WHERE batch_id IS NULL;
CREATE INDEX sync_run_batch ON sync_run (batch_id);
