//! Where the hub gets the time: injected, so that tests move time forward instead of sleeping.
//!
//! The agent also waits through it (pacing, `Retry-After`, search lag, leases, idle polls):
//! [`Clock::sleep`] sleeps on the wall clock and wakes early when asked to stop; a
//! [`ManualClock`] moves its time forward instead, so a test of a 900 s wait takes no wall time.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use time::OffsetDateTime;

/// How often a wall-clock sleep looks at its stop flag.
const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(100);

pub trait Clock: Send + Sync {
    fn now(&self) -> OffsetDateTime;

    /// Time since a fixed origin, never going back (a wall clock stepped by NTP does not move
    /// it): what intervals and deadlines are measured with.
    fn monotonic(&self) -> std::time::Duration {
        let since = self.now() - OffsetDateTime::UNIX_EPOCH;
        since.try_into().unwrap_or_default()
    }

    /// Waits `duration`, or less when `stop` is set meanwhile (looked at every 100 ms).
    /// Returns false when it was stopped.
    fn sleep(&self, duration: std::time::Duration, stop: &AtomicBool) -> bool {
        let deadline = std::time::Instant::now() + duration;
        loop {
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return true;
            }
            std::thread::sleep((deadline - now).min(STOP_POLL));
        }
    }
}

/// The wall clock, in UTC.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    fn monotonic(&self) -> std::time::Duration {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN.get_or_init(std::time::Instant::now).elapsed()
    }
}

/// A clock that shows what it was set to; for tests. Its [`Clock::sleep`] moves it forward by
/// the time asked, at once (unless stopped first).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<OffsetDateTime>,
    origin: OffsetDateTime,
}

impl ManualClock {
    pub fn new(now: OffsetDateTime) -> Self {
        Self {
            now: Mutex::new(now),
            origin: now,
        }
    }

    pub fn advance(&self, by: time::Duration) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn monotonic(&self) -> std::time::Duration {
        (self.now() - self.origin).try_into().unwrap_or_default()
    }

    fn sleep(&self, duration: std::time::Duration, stop: &AtomicBool) -> bool {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        self.advance(duration.try_into().unwrap_or(time::Duration::MAX));
        // Another thread (a simulated server) gets its turn; no wall time is waited.
        std::thread::yield_now();
        !stop.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_sleeps_by_moving_forward() {
        let clock = ManualClock::new(time::macros::datetime!(2026-11-29 10:00:00 UTC));
        let stop = AtomicBool::new(false);
        assert!(clock.sleep(std::time::Duration::from_secs(900), &stop));
        assert_eq!(clock.monotonic(), std::time::Duration::from_secs(900));
        assert_eq!(
            clock.now(),
            time::macros::datetime!(2026-11-29 10:15:00 UTC)
        );
        stop.store(true, Ordering::SeqCst);
        assert!(!clock.sleep(std::time::Duration::from_secs(5), &stop));
        assert_eq!(clock.monotonic(), std::time::Duration::from_secs(900));
    }

    #[test]
    fn a_wall_sleep_ends_early_when_stopped() {
        let stop = AtomicBool::new(true);
        assert!(!SystemClock.sleep(std::time::Duration::from_secs(3600), &stop));
        let a = SystemClock.monotonic();
        assert!(SystemClock.monotonic() >= a);
    }
}
