//! Counters of what the hub did since it started, shared by every `Hub` of the process (the
//! relay's, the timers', the HTTP pool's). `GET /metrics` shows them beside figures read from the
//! database at scrape time (queue depth, age of the last full refresh).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Metrics {
    /// Claim requests applied (replays of a handled id are not counted again).
    pub claims: AtomicU64,
    /// Commands handed out by those claims.
    pub commands_handed_out: AtomicU64,
    pub reports: AtomicU64,
    pub results_accepted: AtomicU64,
    pub results_ignored: AtomicU64,
    pub heartbeats: AtomicU64,
    /// Raw Jira issues stored in the mirror by refresh pages.
    pub issues_ingested: AtomicU64,
    /// Raw Jira issues of refresh pages left out of the mirror (no key, no `fields` object,
    /// `fields` nested deeper than the hub can read back).
    pub issues_not_stored: AtomicU64,
    /// Relay files refused into `rejected/`.
    pub relay_refused: AtomicU64,
}

impl Metrics {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
