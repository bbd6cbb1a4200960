//! `GET /batches/{id}` with an `ETag` and `?wait_seconds=N`: a client that waits for its batch
//! to change is held, without a thread or a connection to the database, until a commit changes a
//! batch (the signal of [`WorkSignal`](crate::service::WorkSignal) that every commit touching a
//! batch, a command or an attempt bumps), a look every [`WAIT_RECHECK`] (a write by another
//! process, such as the CLI, bumps nothing here), the wait's end or the hub's stop.
//!
//! The clients waiting on one batch share its reads: at each change the first of them reads the
//! batch once and the others take that read. At most [`MAX_BATCH_WAITERS`] wait at once; past
//! that a request is answered at once, as without `wait_seconds`.

use super::{ApiError, HubPool};
use crate::service::WAIT_RECHECK;
use axum::body::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many requests may wait for a batch at once (each holds a connection, so the connection
/// cap, `--http-max-connections`, bounds them first unless it is raised).
pub(crate) const MAX_BATCH_WAITERS: usize = 4096;

/// The longest `wait_seconds`.
pub(crate) const MAX_BATCH_WAIT_SECONDS: u32 = 60;

/// One read of a batch: its body as answered and its strong validator.
#[derive(Clone)]
pub(crate) struct BatchRead {
    pub etag: String,
    pub body: Bytes,
}

/// The waiting reads of batches, shared by every request of the process.
pub(crate) struct BatchWaits {
    turns: Arc<tokio::sync::Semaphore>,
    batches: Mutex<HashMap<i64, Arc<Shared>>>,
}

/// The last read of one batch and the change it was made after: waiters of the batch take it
/// rather than read again while no commit changed a batch since.
#[derive(Default)]
struct Shared {
    last: tokio::sync::Mutex<Option<(u64, BatchRead)>>,
}

impl Default for BatchWaits {
    fn default() -> Self {
        BatchWaits {
            turns: Arc::new(tokio::sync::Semaphore::new(MAX_BATCH_WAITERS)),
            batches: Mutex::new(HashMap::new()),
        }
    }
}

/// The batch `id` as `GET /batches/{id}` answers it, with its ETag (a hash of the exact body).
pub(crate) async fn read_batch(pool: &Arc<HubPool>, id: i64) -> Result<BatchRead, ApiError> {
    let body = pool
        .run(move |hub| hub.batch(id).map(|view| serde_json::to_vec(&view)))
        .await?
        .map_err(|error| ApiError::internal(error.to_string()))?;
    Ok(BatchRead {
        etag: format!("\"{:032x}\"", xxhash_rust::xxh3::xxh3_128(&body)),
        body: Bytes::from(body),
    })
}

/// Whether `etag` is one of the `If-None-Match` values given.
pub(crate) fn names(given: &[String], etag: &str) -> bool {
    given.iter().any(|value| none_match_hits(value, etag))
}

impl BatchWaits {
    /// The batch `id`, answered once it differs from what `given` (`If-None-Match`) names, or
    /// from what it is now when none is given, or when `wait` has passed or the hub stops;
    /// at once when [`MAX_BATCH_WAITERS`] wait already.
    pub(crate) async fn wait(
        &self,
        pool: &Arc<HubPool>,
        id: i64,
        given: &[String],
        wait: Duration,
    ) -> Result<BatchRead, ApiError> {
        let deadline = tokio::time::Instant::now() + wait;
        let signal = pool.work_signal();
        let Ok(_turn) = self.turns.clone().try_acquire_owned() else {
            tracing::debug!(
                batch = id,
                "too many waiting reads of batches: answered at once"
            );
            return read_batch(pool, id).await;
        };
        let shared = self.enter(id);
        let _leave = Leave {
            waits: self,
            id,
            shared: shared.clone(),
        };
        let mut first: Option<String> = None;
        loop {
            let changed = signal.batch_changed();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            let generation = signal.batch_generation();
            let read = shared.read(pool, id, generation).await?;
            let same = if given.is_empty() {
                first.get_or_insert_with(|| read.etag.clone()) == &read.etag
            } else {
                names(given, &read.etag)
            };
            if !same || signal.stopping() || tokio::time::Instant::now() >= deadline {
                return Ok(read);
            }
            let recheck = (tokio::time::Instant::now() + WAIT_RECHECK).min(deadline);
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(recheck) => {
                    // Another process may have written: the next look reads again.
                    *shared.last.lock().await = None;
                }
            }
        }
    }

    fn enter(&self, id: i64) -> Arc<Shared> {
        self.batches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id)
            .or_default()
            .clone()
    }

    /// How many batches have a waiting read now.
    #[cfg(test)]
    fn watched(&self) -> usize {
        self.batches.lock().map_or(0, |b| b.len())
    }
}

impl Shared {
    /// The batch as read after change `generation`: read once, whoever asks.
    async fn read(
        &self,
        pool: &Arc<HubPool>,
        id: i64,
        generation: u64,
    ) -> Result<BatchRead, ApiError> {
        let mut last = self.last.lock().await;
        if let Some((at, read)) = last.as_ref()
            && *at == generation
        {
            return Ok(read.clone());
        }
        let read = read_batch(pool, id).await?;
        *last = Some((generation, read.clone()));
        Ok(read)
    }
}

/// A waiter gone: the batch's shared read goes with its last waiter.
struct Leave<'a> {
    waits: &'a BatchWaits,
    id: i64,
    shared: Arc<Shared>,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut batches = self.waits.batches.lock().unwrap_or_else(|p| p.into_inner());
        // The map's own and this one: no other waiter holds it.
        if Arc::strong_count(&self.shared) <= 2 {
            batches.remove(&self.id);
        }
    }
}

/// Whether one `If-None-Match` value (`*` or a list of entity tags) names `etag`; the weak
/// comparison RFC 9110 prescribes for it (`W/"x"` matches `"x"`).
pub(super) fn none_match_hits(value: &str, etag: &str) -> bool {
    value
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_read_goes_with_the_last_waiter() {
        let waits = BatchWaits::default();
        let one = waits.enter(7);
        let two = waits.enter(7);
        assert!(Arc::ptr_eq(&one, &two));
        {
            let _a = Leave {
                waits: &waits,
                id: 7,
                shared: one,
            };
        }
        assert_eq!(waits.watched(), 1, "another waiter holds it");
        {
            let _b = Leave {
                waits: &waits,
                id: 7,
                shared: two,
            };
        }
        assert_eq!(waits.watched(), 0);
    }
}
