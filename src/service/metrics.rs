//! Counters of what the hub did since it started, shared by every `HubConnection` of the process (the
//! relay's, the timers', the HTTP pool's). `GET /metrics` shows them beside figures read from the
//! database at scrape time (queue depth, age of the last full refresh).

use std::sync::atomic::{AtomicU64, Ordering};

/// A relay loop silent for longer than this is stuck (a pass beats before every file and every
/// megabyte read): `/ready` says so and the daemon stops feeding systemd's watchdog.
pub(crate) const RELAY_STALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

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
    /// Refresh pages applied to the mirror.
    pub refresh_pages: AtomicU64,
    /// Raw Jira issues stored in the mirror by refresh pages.
    pub issues_ingested: AtomicU64,
    /// Raw Jira issues of refresh pages left out of the mirror (no key, no `fields` object,
    /// `fields` nested deeper than the hub can read back).
    pub issues_not_stored: AtomicU64,
    /// Relay files refused into `rejected/`.
    pub relay_refused: AtomicU64,
    /// Passes of the relay over `inbox/` (each lists it once): at rest, about one a poll
    /// interval, however the folder is watched.
    pub relay_passes: AtomicU64,
    /// Request files left in `inbox/` after the relay's last pass (waiting to arrive whole, or
    /// beyond the pass's reading budget).
    pub relay_files_waiting: AtomicU64,
    /// Claims held over HTTP now while they wait for work.
    pub claims_waiting_http: AtomicU64,
    /// Claim files the relay's last pass left parked in `inbox/`, waiting for work.
    pub claims_waiting_relay: AtomicU64,
    /// The relay found its folder missing on its last pass (the share is not mounted).
    pub relay_missing: std::sync::atomic::AtomicBool,
    /// Relay files refused on one day of the hub's UTC clock: the day and how many. Counted by
    /// the relay as it refuses, from what `rejected/` held for that day when it took the folder,
    /// so that nothing else reads the share to tell it.
    relay_refused_day: std::sync::Mutex<Option<(time::Date, u64)>>,
    /// When the relay loop last showed it is alive (milliseconds since the Unix epoch; 0 before
    /// it started): a relay stuck in a system call must show in `/ready` and stop the watchdog.
    pub relay_beat_ms: AtomicU64,
    /// Why the relay cannot use its folder now (a folder of the share that is a link), if so.
    pub relay_problem: std::sync::Mutex<Option<String>>,
    /// Finished batches, their commands and attempts pruned past their retention by this
    /// process, and records of handled agent requests forgotten (issue 30, item 3).
    pub pruned_batches: AtomicU64,
    pub pruned_commands: AtomicU64,
    pub pruned_attempts: AtomicU64,
    pub pruned_agent_requests: AtomicU64,
    /// Where the retention walk goes on from: the last batch id it looked at (0: the start).
    pub(crate) retention_cursor: std::sync::atomic::AtomicI64,
    /// Warnings about stored settings already logged by this process (each is told once).
    pub settings_warnings_told: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl Metrics {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// `n` more files refused on `day` (a new day starts from `n`).
    pub(crate) fn count_refused_on(&self, day: time::Date, n: u64) {
        if let Ok(mut slot) = self.relay_refused_day.lock() {
            *slot = match *slot {
                Some((counted, so_far)) if counted == day => Some((day, so_far + n)),
                _ => Some((day, n)),
            };
        }
    }

    /// The relay took a folder whose `rejected/` holds `n` refusals from `day`.
    pub(crate) fn set_refused_on(&self, day: time::Date, n: u64) {
        if let Ok(mut slot) = self.relay_refused_day.lock() {
            *slot = Some((day, n));
        }
    }

    /// Relay files refused on `day`, as far as the relay has counted.
    pub fn refused_on(&self, day: time::Date) -> u64 {
        match self.relay_refused_day.lock().map(|slot| *slot) {
            Ok(Some((counted, n))) if counted == day => n,
            _ => 0,
        }
    }

    /// The relay loop is alive now.
    pub(crate) fn relay_beat(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.relay_beat_ms.store(now, Ordering::Relaxed);
    }

    /// How long ago the relay loop was last alive; `None` before it started.
    pub(crate) fn relay_silent_for(&self) -> Option<std::time::Duration> {
        let beat = self.relay_beat_ms.load(Ordering::Relaxed);
        if beat == 0 {
            return None;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Some(std::time::Duration::from_millis(now.saturating_sub(beat)))
    }

    /// How long the relay loop has been silent, when that is longer than
    /// [`RELAY_STALL_LIMIT`]: it is stuck.
    pub(crate) fn relay_stalled_for(&self) -> Option<std::time::Duration> {
        self.relay_silent_for()
            .filter(|silent| *silent > RELAY_STALL_LIMIT)
    }

    /// Records why the relay cannot use its folder (or that it can again).
    pub(crate) fn set_relay_problem(&self, problem: Option<String>) {
        if let Ok(mut slot) = self.relay_problem.lock() {
            *slot = problem;
        }
    }

    pub fn relay_problem(&self) -> Option<String> {
        self.relay_problem.lock().ok().and_then(|p| p.clone())
    }
}
