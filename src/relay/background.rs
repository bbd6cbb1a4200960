//! The relay's work that no request waits for, on a thread of its own: the folder syncs that make
//! archive moves durable.
//!
//! They are not needed for exactly-once. A request is applied and its answer recorded in one
//! durable commit, and its answer file is durable (synced, renamed, folder synced) before the
//! request leaves `inbox/`; should the move to `archive/` be undone by a power loss, the request
//! is back in `inbox/` and is answered again from the record, applying nothing.

use super::fsio::sync_dir;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the thread gathers folders to sync after the first one asked for, before it syncs
/// each once. A stream of requests (an agent's claims back to back, 1–2 ms apart on a local
/// disk) asked for two folder syncs each (`archive/<day>/` and `inbox/`), and each one ran while
/// the next round trip's own fsyncs waited for the same file system journal; gathered, they cost
/// two syncs a window whatever the rate. A move stays undurable at most this much longer, which
/// exactly-once does not need (above).
const GATHER: Duration = Duration::from_millis(100);

/// The thread and the way to it: folders to sync.
pub(super) struct Background {
    jobs: SyncSender<PathBuf>,
    thread: JoinHandle<()>,
}

impl Background {
    pub(super) fn start() -> std::io::Result<Background> {
        let (jobs, queue) = sync_channel(256);
        let thread = std::thread::Builder::new()
            .name("relay-background".into())
            .spawn(move || work(&queue, GATHER, &sync_now))?;
        Ok(Background { jobs, thread })
    }

    /// Makes what was renamed into or out of `dir` durable, soon. When the queue is full the
    /// folder is synced here and now.
    pub(super) fn sync_dir(&self, dir: &Path) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.jobs.try_send(dir.to_path_buf())
        {
            sync_now(dir);
        }
    }

    /// Does what is queued, then stops the thread.
    pub(super) fn finish(self) {
        drop(self.jobs);
        if self.thread.join().is_err() {
            tracing::error!("the relay's background thread panicked");
        }
    }
}

fn sync_now(dir: &Path) {
    if let Err(error) = sync_dir(dir) {
        tracing::warn!(dir = %dir.display(), %error, "cannot sync a relay folder");
    }
}

/// Takes the first folder queued and every one queued within `gather` after it, then syncs each
/// once (`sync`); stops when the queue is closed, after syncing what it gathered.
fn work(queue: &Receiver<PathBuf>, gather: Duration, sync: &dyn Fn(&Path)) {
    while let Ok(first) = queue.recv() {
        let until = Instant::now() + gather;
        let mut dirs = BTreeSet::from([first]);
        while let Ok(dir) = queue.recv_timeout(until.saturating_duration_since(Instant::now())) {
            dirs.insert(dir);
        }
        for dir in &dirs {
            sync(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn folders_asked_for_within_the_window_are_synced_once_each() {
        let (jobs, queue) = sync_channel(256);
        let synced = Arc::new(Mutex::new(Vec::new()));
        let seen = synced.clone();
        let thread = std::thread::spawn(move || {
            work(&queue, Duration::from_secs(2), &|dir: &Path| {
                seen.lock().unwrap().push(dir.to_path_buf())
            })
        });
        // Ten round trips' worth, a few milliseconds apart, as a stream of requests asks.
        for _ in 0..10 {
            jobs.send(PathBuf::from("/relay/archive/2026-12-02"))
                .unwrap();
            jobs.send(PathBuf::from("/relay/inbox")).unwrap();
            std::thread::sleep(Duration::from_millis(3));
        }
        drop(jobs);
        thread.join().unwrap();
        assert_eq!(
            *synced.lock().unwrap(),
            [
                PathBuf::from("/relay/archive/2026-12-02"),
                PathBuf::from("/relay/inbox")
            ],
            "each folder once, and what was gathered is synced when the queue closes"
        );
    }
}
