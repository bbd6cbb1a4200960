-- Revision 17 of v4: the answers given to requests that carried an `Idempotency-Key` (IETF
-- draft-ietf-httpapi-idempotency-key-header): a request sent again with the same key and body
-- is answered what the first was answered, and nothing is done twice.
-- `credential`: a digest of the client token the key came with (keys are the client's own; the
-- token itself is never stored). `fingerprint`: a digest of the method, the path and the body.
-- `status` is NULL while the first request runs (a row still NULL after a restart: the outcome
-- of a request the restart cut is unknown). `batch_id`: the batch the answer names, if any; the
-- key goes with that batch when retention prunes it. Others go after `created_at` is older than
-- the retention of handled requests.
-- Written so that running it twice changes nothing.
CREATE TABLE IF NOT EXISTS idempotency_key (
    credential  TEXT NOT NULL,
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status      INTEGER,
    answer      BLOB,
    batch_id    INTEGER,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (credential, key)
);
CREATE INDEX IF NOT EXISTS idempotency_key_batch ON idempotency_key (batch_id);
CREATE INDEX IF NOT EXISTS idempotency_key_created ON idempotency_key (created_at);
