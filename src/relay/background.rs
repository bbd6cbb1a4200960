//! The relay's work that no request waits for, on a thread of its own: the folder syncs that make
//! archive moves durable, and the checkpoints of the WAL that the relay's commits leave undone.
//!
//! Neither is needed for exactly-once. A request is applied and its answer recorded in one
//! durable commit, and its answer file is durable (synced, renamed, folder synced) before the
//! request leaves `inbox/`; should the move to `archive/` be undone by a power loss, the request
//! is back in `inbox/` and is answered again from the record, applying nothing. A checkpoint
//! only copies committed pages into the database file.

use super::fsio::sync_dir;
use crate::service::HubConnection;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

enum Job {
    SyncDir(PathBuf),
    Checkpoint,
}

/// The thread and the way to it.
pub(super) struct Background {
    jobs: SyncSender<Job>,
    thread: JoinHandle<()>,
}

impl Background {
    /// Starts the thread with a connection of its own to the hub's database.
    pub(super) fn start(hub: HubConnection) -> std::io::Result<Background> {
        let (jobs, queue) = sync_channel(256);
        let thread = std::thread::Builder::new()
            .name("relay-background".into())
            .spawn(move || work(&hub, &queue))?;
        Ok(Background { jobs, thread })
    }

    /// Makes what was renamed into or out of `dir` durable, soon. When the queue is full the
    /// folder is synced here and now.
    pub(super) fn sync_dir(&self, dir: &Path) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.jobs.try_send(Job::SyncDir(dir.to_path_buf()))
        {
            sync_now(dir);
        }
    }

    /// Asks for a checkpoint of the WAL (one already asked for will do).
    pub(super) fn checkpoint(&self) {
        let _ = self.jobs.try_send(Job::Checkpoint);
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

/// Takes every job queued at once, syncs each folder once, then checkpoints if asked.
fn work(hub: &HubConnection, queue: &Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut dirs = BTreeSet::new();
        let mut checkpoint = false;
        for job in std::iter::once(first).chain(queue.try_iter()) {
            match job {
                Job::SyncDir(dir) => {
                    dirs.insert(dir);
                }
                Job::Checkpoint => checkpoint = true,
            }
        }
        for dir in &dirs {
            sync_now(dir);
        }
        if checkpoint && let Err(error) = hub.checkpoint() {
            tracing::warn!(%error, "a checkpoint of the database's WAL failed; retried later");
        }
    }
}
