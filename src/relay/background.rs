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
            .spawn(move || work(&queue))?;
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

/// Takes every folder queued at once and syncs each once.
fn work(queue: &Receiver<PathBuf>) {
    while let Ok(first) = queue.recv() {
        let dirs: BTreeSet<PathBuf> = std::iter::once(first).chain(queue.try_iter()).collect();
        for dir in &dirs {
            sync_now(dir);
        }
    }
}
