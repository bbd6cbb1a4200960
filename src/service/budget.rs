//! One budget of memory for the agent's reports in flight: the bodies of
//! HTTP `/agent/report` requests and the relay's report files take their size out of it before
//! they are read, and give it back once handled, so that 16 or 256 large reports at once cost
//! at most the budget, not their sum. A report larger than the whole budget takes all of it
//! (it runs alone). HTTP requests wait for their share up to their deadline and are then
//! answered 503 with `Retry-After`; the relay, one file at a time on its own thread, waits a
//! moment and otherwise leaves the file for a later pass, so that the files behind it are not
//! held. A report under [`SMALL_REPORT_BYTES`] (and every claim and heartbeat) never waits: its
//! share is nothing. A wait past [`LONG_WAIT`] is logged (at most every ten seconds) and the
//! reports waiting now are counted for `/metrics`.
//!
//! Counted in KiB (tokio's semaphore counts in `u32`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The small-file size: a report (or any relay file) under it never waits for the budget. Claims,
/// heartbeats and reports of a few results are far below it, and what they cost in memory is
/// bounded by the connections and by the relay's one file at a time, whatever waits for the
/// budget; the relay reads ahead from this size up.
pub const SMALL_REPORT_BYTES: u64 = 64 * 1024;

/// A wait for a share longer than this is logged.
pub const LONG_WAIT: Duration = Duration::from_secs(5);

/// How often at most the log says that reports wait for the budget.
const TELL_EVERY: Duration = Duration::from_secs(10);

/// The budget when the daemon is not told otherwise (`--report-budget-mb`): two reports at the
/// HTTP body limit's default (64 MiB).
pub const DEFAULT_REPORT_BUDGET_BYTES: u64 = 128 * 1024 * 1024;

/// The process's budget.
#[derive(Debug)]
pub struct ReportBudget {
    kib: u32,
    permits: Arc<Semaphore>,
    /// Reports waiting for their share now, both transports.
    waiting: AtomicU64,
    /// When the log last said that reports wait.
    told: Mutex<Option<Instant>>,
}

/// A share of the budget, given back when dropped (nothing for a small report).
#[derive(Debug)]
pub struct BudgetShare(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

/// Counts one report waiting while it lives.
struct Waiting<'a>(&'a AtomicU64);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicU64) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

static BUDGET: OnceLock<ReportBudget> = OnceLock::new();

/// Sets the process's budget (the daemon, once at start); `false` when it was already set.
pub fn set_report_budget(bytes: u64) -> bool {
    BUDGET.set(ReportBudget::new(bytes)).is_ok()
}

/// The process's budget (its default when never set).
pub fn report_budget() -> &'static ReportBudget {
    BUDGET.get_or_init(|| ReportBudget::new(DEFAULT_REPORT_BUDGET_BYTES))
}

impl ReportBudget {
    fn new(bytes: u64) -> ReportBudget {
        let kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX >> 4)
            .clamp(1, Semaphore::MAX_PERMITS as u32);
        ReportBudget {
            kib,
            permits: Arc::new(Semaphore::new(kib as usize)),
            waiting: AtomicU64::new(0),
            told: Mutex::new(None),
        }
    }

    /// The budget in bytes.
    pub fn bytes(&self) -> u64 {
        u64::from(self.kib) * 1024
    }

    /// What a report of `bytes` takes: its size, at most the whole budget; nothing under the
    /// small-file size.
    fn share_of(&self, bytes: u64) -> Option<u32> {
        (bytes >= SMALL_REPORT_BYTES).then(|| {
            u32::try_from(bytes.div_ceil(1024))
                .unwrap_or(u32::MAX)
                .clamp(1, self.kib)
        })
    }

    /// Waits up to `patience` for a share of `bytes`; `None` when the budget stayed taken. A
    /// small report has its (empty) share at once.
    pub async fn take(&self, bytes: u64, patience: Duration) -> Option<BudgetShare> {
        let wanted = match self.share_of(bytes) {
            None => return Some(BudgetShare(None)),
            Some(wanted) => wanted,
        };
        if let Ok(permit) = self.permits.clone().try_acquire_many_owned(wanted) {
            return Some(BudgetShare(Some(permit)));
        }
        let started = Instant::now();
        let waiting = Waiting::new(&self.waiting);
        let share = tokio::time::timeout(patience, self.permits.clone().acquire_many_owned(wanted))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|permit| BudgetShare(Some(permit)));
        drop(waiting);
        self.tell_wait("an HTTP report", bytes, started.elapsed(), share.is_some());
        share
    }

    /// Waits up to `patience` (on a thread that is not the runtime's) for a share of `bytes`,
    /// calling `beat` while it waits; `None` when the budget stayed taken (the relay leaves the
    /// file for a later pass). `waited_before`: how long this file already waited in earlier
    /// tries, for the log. A small file has its (empty) share at once.
    pub fn take_within(
        &self,
        bytes: u64,
        patience: Duration,
        waited_before: Duration,
        beat: &dyn Fn(),
    ) -> Option<BudgetShare> {
        let wanted = match self.share_of(bytes) {
            None => return Some(BudgetShare(None)),
            Some(wanted) => wanted,
        };
        let started = Instant::now();
        let waiting = Waiting::new(&self.waiting);
        let share = loop {
            if let Ok(permit) = self.permits.clone().try_acquire_many_owned(wanted) {
                break Some(BudgetShare(Some(permit)));
            }
            if started.elapsed() >= patience {
                break None;
            }
            beat();
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(waiting);
        self.tell_wait(
            "a relay report file",
            bytes,
            waited_before + started.elapsed(),
            share.is_some(),
        );
        share
    }

    /// Logs a wait past [`LONG_WAIT`] (at most every [`TELL_EVERY`]): what waited, how long,
    /// and whether it has its share now.
    fn tell_wait(&self, what: &str, bytes: u64, waited: Duration, taken: bool) {
        if waited < LONG_WAIT {
            return;
        }
        {
            let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
            if told.is_some_and(|at| at.elapsed() < TELL_EVERY) {
                return;
            }
            *told = Some(Instant::now());
        }
        tracing::warn!(
            report = what,
            kib = bytes.div_ceil(1024),
            waited_seconds = waited.as_secs(),
            taken,
            waiting = self.waiting(),
            budget_mib = self.bytes() / (1024 * 1024),
            free_kib = self.free_bytes() / 1024,
            "a report waited long for the reports' memory budget (--report-budget-mb): other reports hold it"
        );
    }

    /// Reports waiting for their share now, both transports.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Bytes of the budget free now.
    pub fn free_bytes(&self) -> u64 {
        self.permits.available_permits() as u64 * 1024
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_bounded_by_the_budget_and_given_back() {
        let budget = ReportBudget::new(10 * 1024 * 1024);
        let take = |bytes| budget.take_within(bytes, Duration::ZERO, Duration::ZERO, &|| {});
        let first = take(6 * 1024 * 1024).unwrap();
        assert_eq!(budget.free_bytes(), 4 * 1024 * 1024);
        assert!(take(5 * 1024 * 1024).is_none(), "over what is free");
        assert_eq!(budget.waiting(), 0);
        drop(first);
        let whole = take(100 * 1024 * 1024).unwrap();
        assert_eq!(budget.free_bytes(), 0, "larger than the budget: all of it");
        drop(whole);
        assert_eq!(budget.free_bytes(), 10 * 1024 * 1024);
    }

    /// A file under the small-file size never waits, however taken the budget is.
    #[test]
    fn small_reports_never_wait() {
        let budget = ReportBudget::new(1024 * 1024);
        let whole = budget
            .take_within(u64::MAX, Duration::ZERO, Duration::ZERO, &|| {})
            .unwrap();
        assert_eq!(budget.free_bytes(), 0);
        assert!(
            budget
                .take_within(
                    SMALL_REPORT_BYTES - 1,
                    Duration::ZERO,
                    Duration::ZERO,
                    &|| {}
                )
                .is_some()
        );
        assert!(
            budget
                .take_within(SMALL_REPORT_BYTES, Duration::ZERO, Duration::ZERO, &|| {})
                .is_none()
        );
        drop(whole);
    }
}
