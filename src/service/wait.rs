//! Claims that wait for work: a claim with `wait_seconds` that would hand out
//! nothing is held by its transport until a command may have become claimable or the wait ends.
//!
//! [`WorkSignal`] is the in-process signal they wait on: every committing write that can make
//! a command claimable (a batch or refresh enqueued, a retry, a claim timeout that returned a
//! command to the queue, a report that ended a command another depends on, settings changed)
//! bumps its generation and wakes every waiter. A waiter looks again when the generation moved,
//! and at least every [`WAIT_RECHECK`] whatever it is (a write by another process, such as the
//! CLI on the same database, bumps nothing here). No waiter ever spins.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;

/// How often a waiting claim is looked at again even if nothing in this process said so.
pub const WAIT_RECHECK: Duration = Duration::from_secs(30);

/// The signal of "a command may have become claimable", shared by every connection of a process.
#[derive(Debug, Default)]
pub struct WorkSignal {
    generation: AtomicU64,
    /// One more than the generation at which a look found nothing a claim could take (0: none):
    /// waiting claims looked at again at that generation need not read the database.
    idle_at: AtomicU64,
    stopping: AtomicBool,
    notify: tokio::sync::Notify,
    /// Threads that wait on a channel of their own (the relay): each gets a wake-up.
    wakers: Mutex<Vec<SyncSender<()>>>,
    /// The one waiting claim of each agent name, on either transport.
    holders: Mutex<HashMap<String, Holder>>,
    next_holder: AtomicU64,
    /// How many commits changed a batch, a command or an attempt since the process started:
    /// what a client waiting for a batch (`GET /batches/{id}?wait_seconds=N`) waits on.
    batch_generation: AtomicU64,
    batch_notify: tokio::sync::Notify,
}

/// The waiting claim that holds an agent's name.
#[derive(Debug)]
struct Holder {
    id: u64,
    sent_at: OffsetDateTime,
    /// Wakes it when a newer claim of the same name comes (an HTTP claim; the relay is woken
    /// through its channel).
    wake: Option<Arc<tokio::sync::Notify>>,
}

impl WorkSignal {
    /// How many times work may have become claimable since the process started.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Whether a look at generation `generation` found nothing a claim could take.
    pub(crate) fn idle_at(&self, generation: u64) -> bool {
        self.idle_at.load(Ordering::SeqCst) == generation.wrapping_add(1)
    }

    /// A look that began at `generation` found nothing a claim could take.
    pub(crate) fn set_idle_at(&self, generation: u64) {
        self.idle_at
            .store(generation.wrapping_add(1), Ordering::SeqCst);
    }

    /// A command may have become claimable: every waiter looks again.
    pub(crate) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
        // A full channel already holds a wake-up; a closed one belongs to a relay gone.
        self.wake_threads();
    }

    /// A claim of `agent` sent at `sent_at` is about to wait: it takes the name, and the claim
    /// that held it is told to answer now (an agent has at most one waiting claim: the older of
    /// two answers at once, empty if there is nothing for it). A claim sent before the holder's
    /// takes nothing ([`WorkSignal::holds`] is false for it at once). Returns its id.
    pub(crate) fn hold(
        &self,
        agent: &str,
        sent_at: OffsetDateTime,
        wake: Option<Arc<tokio::sync::Notify>>,
    ) -> u64 {
        let id = self.next_holder.fetch_add(1, Ordering::SeqCst) + 1;
        let Ok(mut holders) = self.holders.lock() else {
            return id;
        };
        if holders.get(agent).is_some_and(|h| h.sent_at > sent_at) {
            return id;
        }
        let previous = holders.insert(agent.to_string(), Holder { id, sent_at, wake });
        drop(holders);
        if let Some(previous) = previous {
            match previous.wake {
                Some(wake) => wake.notify_one(),
                None => self.wake_threads(),
            }
        }
        id
    }

    /// Whether the waiting claim `id` still holds `agent`'s name (no newer claim came).
    pub(crate) fn holds(&self, agent: &str, id: u64) -> bool {
        self.holders
            .lock()
            .is_ok_and(|holders| holders.get(agent).is_some_and(|h| h.id == id))
    }

    /// The waiting claim `id` is answered (or gone): it gives the name back.
    pub(crate) fn release(&self, agent: &str, id: u64) {
        if let Ok(mut holders) = self.holders.lock()
            && holders.get(agent).is_some_and(|h| h.id == id)
        {
            holders.remove(agent);
        }
    }

    /// How many agent names a waiting claim holds now.
    pub fn holders(&self) -> usize {
        self.holders.lock().map_or(0, |holders| holders.len())
    }

    fn wake_threads(&self) {
        if let Ok(wakers) = self.wakers.lock() {
            for waker in wakers.iter() {
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

    /// The process stops: waiting claims and waiting reads of a batch are answered now, and
    /// nothing waits any more.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.bump();
        self.batches_changed();
    }

    /// A commit changed a batch (its row, a command or an attempt): every waiting read of a
    /// batch looks again.
    pub(crate) fn batches_changed(&self) {
        self.batch_generation.fetch_add(1, Ordering::SeqCst);
        self.batch_notify.notify_waiters();
    }

    /// How many commits of this process changed a batch since it started.
    pub fn batch_generation(&self) -> u64 {
        self.batch_generation.load(Ordering::SeqCst)
    }

    /// Completes at the next commit that changes a batch, or at the stop; create it before
    /// looking, so that a change between the look and the wait is not missed.
    pub fn batch_changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.batch_notify.notified()
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

    #[test]
    fn a_newer_claim_of_a_name_takes_it_and_wakes_the_older() {
        let signal = WorkSignal::default();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        signal.subscribe(tx);
        let t = |s: i64| OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(s);
        let relay = signal.hold("a", t(10), None);
        assert!(signal.holds("a", relay));
        let wake = Arc::new(tokio::sync::Notify::new());
        let http = signal.hold("a", t(20), Some(wake.clone()));
        assert!(!signal.holds("a", relay), "the older claim lost the name");
        assert!(rx.try_recv().is_ok(), "the relay was woken to answer it");
        // A claim sent before the holder's takes nothing.
        let stale = signal.hold("a", t(15), None);
        assert!(!signal.holds("a", stale) && signal.holds("a", http));
        let other = signal.hold("b", t(0), None);
        assert!(signal.holds("b", other) && signal.holders() == 2);
        let newest = signal.hold("a", t(30), None);
        // The HTTP claim's wake-up was stored (it may not be waiting on it yet).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(wake.notified());
        signal.release("a", http);
        assert!(
            signal.holds("a", newest),
            "only the holder gives the name back"
        );
        signal.release("a", newest);
        assert_eq!(signal.holders(), 1);
    }
}
