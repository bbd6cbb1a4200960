//! Change notifications as a hint only: an event (or a watcher error, or an overflow) wakes the
//! relay loop, which then lists the folder. On a network mount notifications may never come;
//! the timer's listing still finds every file.

use notify::{RecursiveMode, Watcher};
use std::path::Path;
use std::sync::mpsc::SyncSender;

/// Watches `inbox`; every event wakes the loop through `wake` (coalesced: one pending wake is
/// enough). `None` when the folder cannot be watched; the timer's listing goes on regardless.
pub(crate) fn watch_inbox(
    inbox: &Path,
    wake: SyncSender<()>,
) -> Option<notify::RecommendedWatcher> {
    let handler = move |event: notify::Result<notify::Event>| {
        if let Err(error) = &event {
            tracing::debug!(%error, "relay watcher error; the folder will be listed again");
        }
        let _ = wake.try_send(());
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(watcher) => watcher,
        Err(error) => {
            tracing::warn!(%error, "cannot watch the relay inbox; listing on the timer only");
            return None;
        }
    };
    match watcher.watch(inbox, RecursiveMode::NonRecursive) {
        Ok(()) => Some(watcher),
        Err(error) => {
            tracing::warn!(%error, inbox = %inbox.display(), "cannot watch the relay inbox; listing on the timer only");
            None
        }
    }
}
