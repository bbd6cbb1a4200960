//! Change notifications as a hint only: an event that may mean a new or changed file in `inbox/`
//! (or a watcher error, or an overflow) wakes the relay loop, which then lists the folder. On a
//! network mount notifications may never come; the timer's listing still finds every file.
//!
//! Events of the relay's own looking (opening, reading and closing files or the folder without
//! writing, which listing `inbox/` and reading a request raise on the watched folder itself) wake
//! nothing: each woke the loop, whose listing raised the next, and an idle hub spun a core.

use notify::event::{AccessKind, AccessMode, EventKind, MetadataKind, ModifyKind, RenameMode};
use notify::{RecursiveMode, Watcher};
use std::path::Path;
use std::sync::mpsc::SyncSender;

/// Watches `inbox`; every event that may bring work wakes the loop through `wake` (coalesced:
/// one pending wake is enough). `None` when the folder cannot be watched; the timer's listing
/// goes on regardless.
pub(crate) fn watch_inbox(
    inbox: &Path,
    wake: SyncSender<()>,
) -> Option<notify::RecommendedWatcher> {
    let handler = move |event: notify::Result<notify::Event>| {
        if let Err(error) = &event {
            tracing::debug!(%error, "relay watcher error; the folder will be listed again");
        }
        if may_bring_work(&event) {
            let _ = wake.try_send(());
        }
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

/// Whether an event may mean a new or changed file in `inbox/`: a creation, a change of data or
/// metadata (an mtime touched), a name given (renamed in), a file closed after writing, an
/// overflow (events were lost), a watcher error, or a kind this code does not know. Reading,
/// opening, closing without writing, an access time, a removal and a name taken away (renamed
/// out, as the relay's own moves to `archive/`) bring nothing to do; nor does anything that
/// happens only to `.`-names, which are never requests: the agent writes each request under one
/// (created, written, synced, closed: three wake-ups) before renaming it, and each woke a pass
/// that found nothing and that the rename then waited for.
pub(crate) fn may_bring_work(event: &notify::Result<notify::Event>) -> bool {
    let Ok(event) = event else {
        return true;
    };
    if event.need_rescan() {
        return true;
    }
    let hidden = |path: &std::path::PathBuf| {
        path.file_name()
            .is_some_and(|name| name.as_encoded_bytes().starts_with(b"."))
    };
    if !event.paths.is_empty() && event.paths.iter().all(hidden) {
        return false;
    }
    match event.kind {
        EventKind::Access(
            AccessKind::Read
            | AccessKind::Open(_)
            | AccessKind::Close(AccessMode::Read | AccessMode::Execute),
        ) => false,
        EventKind::Modify(
            ModifyKind::Metadata(MetadataKind::AccessTime) | ModifyKind::Name(RenameMode::From),
        ) => false,
        EventKind::Remove(_) => false,
        EventKind::Access(_)
        | EventKind::Create(_)
        | EventKind::Modify(_)
        | EventKind::Any
        | EventKind::Other => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, Flag, RemoveKind};

    fn event(kind: EventKind) -> notify::Result<notify::Event> {
        Ok(notify::Event::new(kind))
    }

    #[test]
    fn only_what_may_bring_a_file_wakes_the_loop() {
        for kind in [
            EventKind::Create(CreateKind::File),
            EventKind::Create(CreateKind::Any),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            EventKind::Modify(ModifyKind::Name(RenameMode::Any)),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::WriteTime)),
            EventKind::Modify(ModifyKind::Any),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Access(AccessKind::Close(AccessMode::Any)),
            EventKind::Access(AccessKind::Other),
            EventKind::Any,
            EventKind::Other,
        ] {
            assert!(may_bring_work(&event(kind)), "{kind:?} must wake the loop");
        }
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Open(AccessMode::Read)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)),
            EventKind::Modify(ModifyKind::Name(RenameMode::From)),
            EventKind::Remove(RemoveKind::File),
        ] {
            assert!(
                !may_bring_work(&event(kind)),
                "{kind:?} must not wake the loop"
            );
        }
        let overflow =
            notify::Event::new(EventKind::Access(AccessKind::Read)).set_flag(Flag::Rescan);
        assert!(
            may_bring_work(&Ok(overflow.add_path("/r/inbox/.x.tmp".into()))),
            "an overflow wakes it, whatever name it carries"
        );
    }

    #[test]
    fn what_happens_only_to_dot_names_wakes_nothing() {
        let at = |kind: EventKind, paths: &[&str]| {
            let mut event = notify::Event::new(kind);
            for path in paths {
                event = event.add_path(std::path::PathBuf::from(path));
            }
            may_bring_work(&Ok(event))
        };
        let temp = "/r/inbox/.claim-a.json.4242.tmp";
        for kind in [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
        ] {
            assert!(!at(kind, &[temp]), "{kind:?} of the agent's temporary file");
            assert!(
                at(kind, &["/r/inbox/claim-a.json"]),
                "{kind:?} of a request"
            );
            assert!(at(kind, &[]), "{kind:?} naming no file");
        }
        // The rename that gives the request its name wakes the loop, in either form.
        let to = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        assert!(at(to, &["/r/inbox/claim-a.json"]));
        let both = EventKind::Modify(ModifyKind::Name(RenameMode::Both));
        assert!(at(both, &[temp, "/r/inbox/claim-a.json"]));
        // The folder itself is not a `.`-name.
        assert!(at(EventKind::Modify(ModifyKind::Any), &["/r/inbox"]));
    }

    #[test]
    fn errors_wake_the_loop() {
        let overflow =
            notify::Event::new(EventKind::Access(AccessKind::Read)).set_flag(Flag::Rescan);
        assert!(may_bring_work(&Ok(overflow)), "an overflow wakes it");
        assert!(may_bring_work(&Err(notify::Error::generic("lost"))));
    }
}
