//! `idempotency_key`: the answers given to client requests that carried an `Idempotency-Key`
//! (IETF draft-ietf-httpapi-idempotency-key-header), so that the same request sent again is
//! answered the same and done once.

use super::Result;
use super::tx::Tx;
use rusqlite::{OptionalExtension, params};

/// What is stored under one client's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyRow {
    /// Nothing: the key is now reserved for this request.
    Reserved,
    /// A request under the key has not been answered (still running, or cut by a restart).
    Unanswered { fingerprint: String },
    /// The first request's answer.
    Answered {
        fingerprint: String,
        status: u16,
        answer: Vec<u8>,
    },
}

impl Tx<'_> {
    /// The row of `key` of `credential`, reserving it for a request of `fingerprint` when there
    /// is none.
    pub(crate) fn reserve_key(
        &self,
        credential: &str,
        key: &str,
        fingerprint: &str,
        now: &str,
    ) -> Result<KeyRow> {
        let found = self
            .0
            .prepare_cached(
                "SELECT fingerprint, status, answer FROM idempotency_key
                 WHERE credential = ?1 AND key = ?2",
            )?
            .query_row(params![credential, key], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<u16>>(1)?,
                    row.get::<_, Option<Vec<u8>>>(2)?,
                ))
            })
            .optional()?;
        Ok(match found {
            Some((fingerprint, Some(status), answer)) => KeyRow::Answered {
                fingerprint,
                status,
                answer: answer.unwrap_or_default(),
            },
            Some((fingerprint, None, _)) => KeyRow::Unanswered { fingerprint },
            None => {
                self.0
                    .prepare_cached(
                        "INSERT INTO idempotency_key (credential, key, fingerprint, created_at)
                         VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute(params![credential, key, fingerprint, now])?;
                KeyRow::Reserved
            }
        })
    }

    /// Keeps the answer of the request that reserved `key`; `batch_id`: the batch it names.
    pub(crate) fn answer_key(
        &self,
        credential: &str,
        key: &str,
        status: u16,
        answer: &[u8],
        batch_id: Option<i64>,
    ) -> Result<()> {
        self.0
            .prepare_cached(
                "UPDATE idempotency_key SET status = ?3, answer = ?4, batch_id = ?5
                 WHERE credential = ?1 AND key = ?2 AND status IS NULL",
            )?
            .execute(params![credential, key, status, answer, batch_id])?;
        Ok(())
    }

    /// Frees `key` of a request whose outcome is not kept (it did nothing: it may be sent again).
    pub(crate) fn free_key(&self, credential: &str, key: &str) -> Result<()> {
        self.0
            .prepare_cached(
                "DELETE FROM idempotency_key WHERE credential = ?1 AND key = ?2 AND status IS NULL",
            )?
            .execute(params![credential, key])?;
        Ok(())
    }

    /// Forgets at most `limit` keys made before `before` whose answer names no batch (those
    /// that name one go with their batch). Returns how many.
    pub(crate) fn prune_idempotency_keys(&self, before: &str, limit: i64) -> Result<usize> {
        Ok(self
            .0
            .prepare_cached(
                "DELETE FROM idempotency_key WHERE rowid IN (
                     SELECT rowid FROM idempotency_key
                     WHERE created_at < ?1 AND batch_id IS NULL LIMIT ?2)",
            )?
            .execute(params![before, limit])?)
    }

    /// How many keys are kept.
    pub(crate) fn key_count(&self) -> Result<i64> {
        Ok(self
            .0
            .query_row("SELECT count(*) FROM idempotency_key", [], |row| row.get(0))?)
    }
}
