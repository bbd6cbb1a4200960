//! One budget of memory for the agent's reports in flight: the bodies of
//! HTTP `/agent/report` requests and the relay's report files take their size out of it before
//! they are read, and give it back once handled, so that 16 or 256 large reports at once cost
//! at most the budget, not their sum. A report larger than the whole budget takes all of it
//! (it runs alone). HTTP requests wait for their share up to their deadline and are then
//! answered 503 with `Retry-After`; the relay, one file at a time on its own thread, waits.
//!
//! Counted in KiB (tokio's semaphore counts in `u32`).

use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget when the daemon is not told otherwise (`--report-budget-mb`): two reports at the
/// HTTP body limit's default (64 MiB).
pub const DEFAULT_REPORT_BUDGET_BYTES: u64 = 128 * 1024 * 1024;

/// The process's budget.
#[derive(Debug)]
pub struct ReportBudget {
    kib: u32,
    permits: Arc<Semaphore>,
}

/// A share of the budget, given back when dropped.
#[derive(Debug)]
pub struct BudgetShare(#[allow(dead_code)] OwnedSemaphorePermit);

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
        }
    }

    /// The budget in bytes.
    pub fn bytes(&self) -> u64 {
        u64::from(self.kib) * 1024
    }

    /// What a report of `bytes` takes: its size, at most the whole budget.
    fn share_of(&self, bytes: u64) -> u32 {
        u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.kib)
    }

    /// Waits up to `patience` for a share of `bytes`; `None` when the budget stayed taken.
    pub async fn take(&self, bytes: u64, patience: Duration) -> Option<BudgetShare> {
        let wanted = self.share_of(bytes);
        tokio::time::timeout(patience, self.permits.clone().acquire_many_owned(wanted))
            .await
            .ok()?
            .ok()
            .map(BudgetShare)
    }

    /// Waits (on a thread that is not the runtime's) for a share of `bytes`, calling `beat`
    /// while it waits.
    pub fn take_blocking(&self, bytes: u64, beat: &dyn Fn()) -> BudgetShare {
        let wanted = self.share_of(bytes);
        loop {
            if let Ok(permit) = self.permits.clone().try_acquire_many_owned(wanted) {
                return BudgetShare(permit);
            }
            beat();
            std::thread::sleep(Duration::from_millis(20));
        }
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
        let budget = ReportBudget::new(10 * 1024);
        let first = budget.take_blocking(6 * 1024, &|| {});
        assert_eq!(budget.free_bytes(), 4 * 1024);
        assert!(budget.permits.clone().try_acquire_many_owned(5).is_err());
        drop(first);
        let whole = budget.take_blocking(100 * 1024, &|| {});
        assert_eq!(budget.free_bytes(), 0, "larger than the budget: all of it");
        drop(whole);
        assert_eq!(budget.free_bytes(), 10 * 1024);
    }
}
