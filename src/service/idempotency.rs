//! Requests with an `Idempotency-Key`: the key's row is reserved before the request runs and
//! holds its answer once it is answered, so that the same request sent again (a client that
//! lost the answer to a timeout or a proxy's 502) is answered the same and done once.

use super::{HubConnection, Result};
use crate::domain::time::Utc;
use crate::store::KeyRow;

/// What a key says of a request about to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyState {
    /// The key is new: the request runs, and its answer is kept with [`HubConnection::answer_key`].
    Run,
    /// The same request was answered: this is its answer.
    Answered { status: u16, answer: Vec<u8> },
    /// Another request (another method, path or body) was sent with this key.
    OtherRequest,
    /// A request under this key was never answered: the hub stopped while it ran, so whether it
    /// was done is unknown.
    Unanswered,
}

impl HubConnection {
    /// Reserves `key` of `credential` for a request of `fingerprint`, or says what it holds.
    pub fn reserve_key(
        &mut self,
        credential: &str,
        key: &str,
        fingerprint: &str,
    ) -> Result<KeyState> {
        let now = self.now();
        let row = self
            .store
            .transact(|tx| tx.reserve_key(credential, key, fingerprint, now.as_str()))?;
        Ok(match row {
            KeyRow::Reserved => KeyState::Run,
            KeyRow::Answered {
                fingerprint: first,
                status,
                answer,
            } if first == fingerprint => KeyState::Answered { status, answer },
            KeyRow::Unanswered { fingerprint: first } if first == fingerprint => {
                KeyState::Unanswered
            }
            KeyRow::Answered { .. } | KeyRow::Unanswered { .. } => KeyState::OtherRequest,
        })
    }

    /// Keeps the answer of the request that reserved `key` (`batch_id`: the batch it names, with
    /// which the key is pruned).
    pub fn answer_key(
        &mut self,
        credential: &str,
        key: &str,
        status: u16,
        answer: &[u8],
        batch_id: Option<i64>,
    ) -> Result<()> {
        Ok(self
            .store
            .transact(|tx| tx.answer_key(credential, key, status, answer, batch_id))?)
    }

    /// Frees `key`: its request did nothing (refused before it ran, or the database failed), so
    /// it may be sent again under the same key.
    pub fn free_key(&mut self, credential: &str, key: &str) -> Result<()> {
        Ok(self.store.transact(|tx| tx.free_key(credential, key))?)
    }

    /// Forgets at most `limit` keys older than `before` whose answer names no batch.
    pub(crate) fn prune_old_keys(&mut self, before: &Utc, limit: i64) -> Result<usize> {
        Ok(self
            .store
            .transact(|tx| tx.prune_idempotency_keys(before.as_str(), limit))?)
    }

    /// How many keys are kept.
    pub fn key_count(&mut self) -> Result<i64> {
        Ok(self.store.read(|tx| tx.key_count())?)
    }
}
