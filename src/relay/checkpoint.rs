//! When the relay copies the WAL into the database file, and on which thread.
//!
//! Under [`Relay::run`](super::Relay) the relay's connection has `wal_autocheckpoint = 0`: no
//! commit copies the WAL, the relay checkpoints between requests. A checkpoint copies every page
//! the WAL holds into the database file and syncs that file. Copying in the middle of a burst of
//! refresh pages made every answer after it wait: a refresh of 20,000 issues (20 pages, about
//! 130 MB of WAL) paid for two or three checkpoints on the relay's thread, a tenth of its time, where
//! copying once after the burst does the same work once the relay has nothing else to do
//! (docs/design/relay-folder.md, "Checkpoints").
//! - While requests keep coming, the relay copies in line once they wrote about
//!   [`STREAM_BYTES`]: a stream that does not stop still starts the WAL over, and the WAL never
//!   holds much more than that.
//! - When a pass leaves nothing waiting and the requests wrote [`IDLE_BYTES`] or more, the copy
//!   is handed to a thread of its own (`relay-checkpoint`, on a connection of its own), so that a
//!   claim that comes right after a burst does not wait for it.
//! - SQLite writes the WAL from its beginning again only when a transaction begins with every
//!   frame copied: once the thread's copy has ended, the relay copies in line what was committed
//!   meanwhile (usually nothing) at its next request or pass, and its next commit starts the WAL
//!   over. Should requests write [`STREAM_BYTES`] before the thread's copy ends, the relay waits
//!   for it.

use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread::JoinHandle;

/// About how much the requests may write to the WAL while they keep coming before the relay
/// copies it in line (SQLite's own automatic checkpoint runs every 1,000 pages). The count is the
/// requests' sizes (see `REQUEST_WAL_PAGES`); a page of refresh issues writes about 1.7 times its
/// size to the WAL (its rows, and the index pages it touches, whole), so the WAL reaches about
/// 110 MB before it starts over.
pub(super) const STREAM_BYTES: u64 = 64 * 1024 * 1024;
/// How much they wrote before a pass that leaves nothing waiting has the WAL copied.
pub(super) const IDLE_BYTES: u64 = 4 * 1024 * 1024;

/// The two thresholds above (tests use smaller ones).
#[derive(Debug, Clone, Copy)]
pub(super) struct Thresholds {
    pub stream: u64,
    pub idle: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            stream: STREAM_BYTES,
            idle: IDLE_BYTES,
        }
    }
}

/// The relay's checkpoints: what was written since the last complete one, and the thread.
pub(super) struct Checkpoints {
    thresholds: Thresholds,
    /// About how many bytes the requests wrote to the WAL since the last checkpoint that copied
    /// everything (an in-line one).
    wal_bytes: u64,
    thread: Option<Checkpointer>,
}

impl Checkpoints {
    /// Checkpoints in line only, as the relay does without a thread for them.
    pub(super) fn in_line(thresholds: Thresholds) -> Self {
        Checkpoints {
            thresholds,
            wal_bytes: 0,
            thread: None,
        }
    }

    /// Checkpoints after a burst run `job` (a passive checkpoint on a connection of its own) on
    /// a thread.
    pub(super) fn with_thread(
        thresholds: Thresholds,
        job: impl FnMut() + Send + 'static,
    ) -> std::io::Result<Self> {
        Ok(Checkpoints {
            thread: Some(Checkpointer::start(job)?),
            ..Checkpoints::in_line(thresholds)
        })
    }

    /// A request wrote about `bytes` to the WAL and was answered; `in_line` checkpoints on the
    /// relay's own connection.
    pub(super) fn applied(&mut self, bytes: u64, in_line: &mut dyn FnMut()) {
        self.wal_bytes = self.wal_bytes.saturating_add(bytes);
        if let Some(thread) = self.thread.as_mut().filter(|thread| thread.in_flight) {
            if thread.finished() {
                self.copy_in_line(in_line);
                return;
            }
            if self.wal_bytes >= self.thresholds.stream {
                tracing::debug!(
                    wal_bytes = self.wal_bytes,
                    "the checkpoint thread is behind the requests; the relay waits for it"
                );
                thread.wait();
                self.copy_in_line(in_line);
            }
        } else if self.wal_bytes >= self.thresholds.stream {
            self.copy_in_line(in_line);
        }
    }

    /// A pass left nothing waiting.
    pub(super) fn idle(&mut self, in_line: &mut dyn FnMut()) {
        match &mut self.thread {
            Some(thread) if thread.in_flight => {
                if thread.finished() {
                    self.copy_in_line(in_line);
                }
            }
            _ if self.wal_bytes < self.thresholds.idle => {}
            Some(thread) => {
                if !thread.hand() {
                    self.copy_in_line(in_line);
                }
            }
            None => self.copy_in_line(in_line),
        }
    }

    fn copy_in_line(&mut self, in_line: &mut dyn FnMut()) {
        self.wal_bytes = 0;
        in_line();
    }

    /// Lets a checkpoint on the thread finish, then stops the thread.
    pub(super) fn finish(self) {
        if let Some(thread) = self.thread {
            thread.finish();
        }
    }
}

/// The thread and the way to it: one checkpoint at a time.
struct Checkpointer {
    jobs: SyncSender<()>,
    done: Receiver<()>,
    /// A checkpoint was handed over and its end not seen yet.
    in_flight: bool,
    thread: JoinHandle<()>,
}

impl Checkpointer {
    fn start(mut job: impl FnMut() + Send + 'static) -> std::io::Result<Self> {
        let (jobs, queue) = sync_channel::<()>(1);
        let (done_tx, done) = sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("relay-checkpoint".into())
            .spawn(move || {
                while queue.recv().is_ok() {
                    job();
                    if done_tx.send(()).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Checkpointer {
            jobs,
            done,
            in_flight: false,
            thread,
        })
    }

    /// Starts a checkpoint on the thread; `false` when the thread is gone (it panicked).
    fn hand(&mut self) -> bool {
        self.in_flight = self.jobs.try_send(()).is_ok();
        self.in_flight
    }

    /// Whether the checkpoint handed over has ended (a thread that died ended it too).
    fn finished(&mut self) -> bool {
        let ended = !matches!(self.done.try_recv(), Err(TryRecvError::Empty));
        if ended {
            self.in_flight = false;
        }
        ended
    }

    fn wait(&mut self) {
        let _ = self.done.recv();
        self.in_flight = false;
    }

    fn finish(self) {
        drop(self.jobs);
        if self.thread.join().is_err() {
            tracing::error!("the relay's checkpoint thread panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    const SMALL: Thresholds = Thresholds {
        stream: 4 << 20,
        idle: 256 << 10,
    };

    /// Counts the relay's in-line checkpoints.
    fn counter() -> (Arc<AtomicUsize>, impl FnMut()) {
        let in_line = Arc::new(AtomicUsize::new(0));
        let counted = in_line.clone();
        (in_line, move || {
            counted.fetch_add(1, Ordering::SeqCst);
        })
    }

    /// Passes that leave nothing waiting, until the relay copied in line `n` times in all.
    fn idle_until(
        checkpoints: &mut Checkpoints,
        in_line: &dyn Fn() -> usize,
        n: usize,
        copy: &mut dyn FnMut(),
    ) {
        let started = Instant::now();
        while in_line() < n {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the thread's copy never ended"
            );
            checkpoints.idle(copy);
            std::thread::yield_now();
        }
    }

    /// Each step of the plan, with a thread whose copy ends when the test says so.
    #[test]
    fn bursts_are_copied_on_the_thread_and_streams_in_line() {
        let (release_tx, release) = sync_channel::<()>(8);
        let mut checkpoints = Checkpoints::with_thread(SMALL, move || {
            let _ = release.recv();
        })
        .unwrap();
        let in_flight = |c: &Checkpoints| c.thread.as_ref().unwrap().in_flight;
        let (in_line, mut count) = counter();
        let copies = || in_line.load(Ordering::SeqCst);
        let kib = 1 << 10;
        // A stream copies in line at its threshold.
        checkpoints.applied(SMALL.stream - 1, &mut count);
        assert_eq!(copies(), 0);
        checkpoints.applied(1, &mut count);
        assert_eq!(copies(), 1);
        assert!(!in_flight(&checkpoints));
        // Below the idle threshold a pass's end copies nothing; past it, the thread does.
        checkpoints.applied(100 * kib, &mut count);
        checkpoints.idle(&mut count);
        assert!(!in_flight(&checkpoints));
        checkpoints.applied(200 * kib, &mut count);
        checkpoints.idle(&mut count);
        assert!(in_flight(&checkpoints), "handed to the thread");
        assert_eq!(copies(), 1);
        // Still running: requests go on below the stream threshold, nothing in line.
        checkpoints.applied(SMALL.stream / 2, &mut count);
        checkpoints.idle(&mut count);
        assert_eq!(copies(), 1);
        // It ended: the next pass copies the rest in line, and the count starts over.
        release_tx.send(()).unwrap();
        let counted = in_line.clone();
        idle_until(
            &mut checkpoints,
            &|| counted.load(Ordering::SeqCst),
            2,
            &mut count,
        );
        assert!(!in_flight(&checkpoints));
        assert_eq!(checkpoints.wal_bytes, 0);
        // Handed over again; requests reaching the stream threshold wait for it, then copy.
        checkpoints.applied(SMALL.idle, &mut count);
        checkpoints.idle(&mut count);
        assert!(in_flight(&checkpoints));
        let releasing = release_tx.clone();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            releasing.send(()).unwrap();
        });
        checkpoints.applied(SMALL.stream, &mut count);
        assert_eq!(copies(), 3);
        assert!(!in_flight(&checkpoints));
        releaser.join().unwrap();
        drop(release_tx);
        checkpoints.finish();
    }

    #[test]
    fn without_a_thread_or_with_a_dead_one_every_checkpoint_is_in_line() {
        let (in_line, mut count) = counter();
        let copies = || in_line.load(Ordering::SeqCst);
        let mut alone = Checkpoints::in_line(SMALL);
        alone.applied(SMALL.idle, &mut count);
        alone.idle(&mut count);
        assert_eq!(copies(), 1);

        let mut dead =
            Checkpoints::with_thread(SMALL, || panic!("a checkpoint that panics")).unwrap();
        dead.applied(SMALL.idle, &mut count);
        dead.idle(&mut count);
        // The thread died: its end counts as finished...
        let counted = in_line.clone();
        idle_until(&mut dead, &|| counted.load(Ordering::SeqCst), 2, &mut count);
        // ...and nothing is handed to it again.
        dead.applied(SMALL.idle, &mut count);
        dead.idle(&mut count);
        assert_eq!(copies(), 3);
        dead.finish();
    }
}
