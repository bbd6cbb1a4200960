//! Every wait of the agent: pacing, `Retry-After`, Cloud's search lag, leases, idle polls and
//! the hub's `pause_seconds` all sleep through [`Waits::sleep`], on the injected clock
//! ([`crate::clock`]), in steps short enough to feed systemd's watchdog (`WatchdogSec=` in
//! `systemd/jira-hub-agent.service`) and to stop at once when the agent is asked to.

use crate::clock::Clock;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest step of a wait: the watchdog is fed, and the stop flag read, between two steps.
pub(crate) const FEED_EVERY: Duration = Duration::from_secs(1);

/// Where `WATCHDOG=1` goes.
pub(crate) enum Notifier {
    /// systemd's `NOTIFY_SOCKET`, when it is set.
    Systemd,
    /// A datagram socket at this path (tests: a socket in a temporary folder).
    Socket(PathBuf),
}

/// The lease of the command being executed, as the waits see it (`agent::LeaseKeeper`).
pub(crate) trait Lease: Send + Sync {
    /// Whether a wait of `wait` from `now` may start: the lease covers it (renewed first when it
    /// would not). False: the command goes back to the hub instead of waiting.
    fn may_wait(&self, now: Duration, wait: Duration) -> bool;
    /// Between the steps of a wait: renews the lease when it is due. False when it was lost.
    fn keep(&self, now: Duration) -> bool;
}

/// The agent's clock, stop flag and watchdog, shared by the loop, the Jira client and the link
/// to the hub.
pub(crate) struct Waits {
    clock: Arc<dyn Clock>,
    stop: Arc<AtomicBool>,
    notifier: Notifier,
    /// When the watchdog was last fed (monotonic).
    fed: Mutex<Option<Duration>>,
    /// The lease kept during waits, while a command runs.
    lease: Mutex<Option<Arc<dyn Lease>>>,
}

impl Waits {
    pub(crate) fn new(clock: Arc<dyn Clock>, stop: Arc<AtomicBool>, notifier: Notifier) -> Waits {
        Waits {
            clock,
            stop,
            notifier,
            fed: Mutex::new(None),
            lease: Mutex::new(None),
        }
    }

    /// The lease the waits keep from now on (`None`: no command runs).
    pub(crate) fn hold(&self, lease: Option<Arc<dyn Lease>>) {
        if let Ok(mut slot) = self.lease.lock() {
            *slot = lease;
        }
    }

    fn lease(&self) -> Option<Arc<dyn Lease>> {
        self.lease.lock().ok().and_then(|slot| slot.clone())
    }

    /// Whether a wait this long may start with the lease held (always, with none).
    pub(crate) fn may_wait(&self, wait: Duration) -> bool {
        self.lease()
            .is_none_or(|lease| lease.may_wait(self.now(), wait))
    }

    /// Monotonic time: what intervals and deadlines are measured with.
    pub(crate) fn now(&self) -> Duration {
        self.clock.monotonic()
    }

    /// The time of day (UTC), for what is sent to the hub.
    pub(crate) fn wall(&self) -> time::OffsetDateTime {
        self.clock.now()
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Tells the watchdog the agent is alive (at most once a second of the clock).
    pub(crate) fn alive(&self) {
        match &self.notifier {
            Notifier::Systemd => super::alive(),
            Notifier::Socket(path) => {
                let now = self.now();
                let Ok(mut fed) = self.fed.lock() else { return };
                if fed.is_some_and(|at| now.saturating_sub(at) < FEED_EVERY) {
                    return;
                }
                *fed = Some(now);
                // A full queue (its reader stalled) holds the agent half a second at most.
                if let Ok(socket) = std::os::unix::net::UnixDatagram::unbound()
                    && socket
                        .set_write_timeout(Some(Duration::from_millis(500)))
                        .is_ok()
                {
                    let _ = socket.send_to(b"WATCHDOG=1", path);
                }
            }
        }
    }

    /// Sleeps `total`, feeding the watchdog at least every [`FEED_EVERY`] and keeping the
    /// running command's lease. Returns false when the agent is stopping (at once, or as soon
    /// as it is asked to) or the lease was lost.
    pub(crate) fn sleep(&self, total: Duration) -> bool {
        let lease = self.lease();
        let until = self.now() + total;
        loop {
            self.alive();
            if self.stopping() {
                return false;
            }
            let now = self.now();
            if lease.as_ref().is_some_and(|lease| !lease.keep(now)) {
                return false;
            }
            if now >= until {
                return true;
            }
            if !self.clock.sleep((until - now).min(FEED_EVERY), &self.stop) {
                return false;
            }
        }
    }

    /// Sleeps `total` whether or not the agent is stopping (a report still awaited while it
    /// stops), feeding the watchdog.
    pub(crate) fn sleep_through(&self, total: Duration) {
        let never = AtomicBool::new(false);
        let until = self.now() + total;
        loop {
            self.alive();
            let now = self.now();
            if now >= until {
                return;
            }
            self.clock.sleep((until - now).min(FEED_EVERY), &never);
        }
    }

    /// Sleeps until the monotonic time `until`; see [`Waits::sleep`].
    pub(crate) fn sleep_until(&self, until: Duration) -> bool {
        self.sleep(until.saturating_sub(self.now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn a_long_wait_feeds_the_watchdog_every_second_of_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        // Read as systemd does, all along.
        let reader = std::thread::spawn(move || {
            let mut pings = 0;
            let mut buf = [0u8; 64];
            while let Ok(n) = listener.recv(&mut buf) {
                if &buf[..n] == b"END" {
                    break;
                }
                assert_eq!(&buf[..n], b"WATCHDOG=1");
                pings += 1;
            }
            pings
        });
        let clock = Arc::new(ManualClock::new(
            time::macros::datetime!(2026-11-29 10:00:00 UTC),
        ));
        let waits = Waits::new(
            clock.clone(),
            Arc::new(AtomicBool::new(false)),
            Notifier::Socket(path.clone()),
        );
        assert!(waits.sleep(Duration::from_secs(240)));
        assert_eq!(waits.now(), Duration::from_secs(240));
        let end = std::os::unix::net::UnixDatagram::unbound().unwrap();
        end.send_to(b"END", &path).unwrap();
        let pings = reader.join().unwrap();
        assert!(pings >= 240, "{pings} pings in 240 s");
    }

    #[test]
    fn a_wait_ends_when_the_agent_stops() {
        let clock = Arc::new(ManualClock::new(
            time::macros::datetime!(2026-11-29 10:00:00 UTC),
        ));
        let stop = Arc::new(AtomicBool::new(true));
        let waits = Waits::new(clock, stop, Notifier::Systemd);
        assert!(!waits.sleep(Duration::from_secs(300)));
        assert_eq!(waits.now(), Duration::ZERO);
    }
}
