//! Claims that wait for work (issue 18): a claim with `wait_seconds` that would hand out
//! nothing is held by its transport until a command may have become claimable or the wait ends.
//!
//! [`WorkSignal`] is the in-process signal they wait on: every committing write that can make
//! a command claimable (a batch or refresh enqueued, a retry, a claim timeout that returned a
//! command to the queue, a report that ended a command another depends on, settings changed)
//! bumps its generation and wakes every waiter. A waiter looks again when the generation moved,
//! and at least every [`WAIT_RECHECK`] whatever it is (a write by another process, such as the
//! CLI on the same database, bumps nothing here). No waiter ever spins.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::time::Duration;

/// How often a waiting claim is looked at again even if nothing in this process said so.
pub const WAIT_RECHECK: Duration = Duration::from_secs(30);

/// The signal of "a command may have become claimable", shared by every connection of a process.
#[derive(Debug, Default)]
pub struct WorkSignal {
    generation: AtomicU64,
    stopping: AtomicBool,
    notify: tokio::sync::Notify,
    /// Threads that wait on a channel of their own (the relay): each gets a wake-up.
    wakers: Mutex<Vec<SyncSender<()>>>,
}

impl WorkSignal {
    /// How many times work may have become claimable since the process started.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// A command may have become claimable: every waiter looks again.
    pub(crate) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
        if let Ok(wakers) = self.wakers.lock() {
            for waker in wakers.iter() {
                // A full channel already holds a wake-up; a closed one belongs to a relay gone.
                let _ = waker.try_send(());
            }
        }
    }

    /// Wakes `waker` at every bump (and at the stop).
    pub(crate) fn subscribe(&self, waker: SyncSender<()>) {
        if let Ok(mut wakers) = self.wakers.lock() {
            wakers.push(waker);
        }
    }

    /// Completes at the next bump or stop; create it before looking, so that a bump between
    /// the look and the wait is not missed.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    /// The process stops: waiting claims are answered now, and no claim waits any more.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.bump();
    }

    /// Whether the process is stopping (no claim may wait).
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bump_wakes_a_waiter_armed_before_it_and_every_channel() {
        let signal = WorkSignal::default();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        signal.subscribe(tx);
        let armed = signal.notified();
        let mut armed = std::pin::pin!(armed);
        armed.as_mut().enable();
        let before = signal.generation();
        signal.bump();
        signal.bump();
        assert_eq!(signal.generation(), before + 2);
        assert!(rx.try_recv().is_ok(), "the channel was woken");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(armed);
        assert!(!signal.stopping());
        signal.stop();
        assert!(signal.stopping());
    }
}
