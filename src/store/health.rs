//! The database file under a running hub: a full disk, a file or folder made
//! read-only, an I/O error, the file deleted or replaced. Each is a [`Fault`], kept in the
//! [`DbHealth`] every connection of the process shares, so `/ready`, `/metrics` and the log say
//! what is wrong until a write succeeds again.
//!
//! A connection that met `SQLITE_READONLY`, `SQLITE_CANTOPEN` or `SQLITE_IOERR` is replaced by a
//! new one: SQLite opens a file it cannot write read-only and the connection stays so for good,
//! even once the file is writable again. Whether the file at the path is still the one the
//! process opened is checked by its device and inode (`stat` of the path against those recorded
//! at open) before every commit, so no write is acknowledged into a deleted file.

use super::{Result, StoreError};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use time::OffsetDateTime;

/// What is wrong with the database file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `SQLITE_FULL`: no room on its disk.
    Full,
    /// `SQLITE_READONLY`: the file or its folder cannot be written.
    ReadOnly,
    /// `SQLITE_IOERR`, `SQLITE_CANTOPEN`: the disk or the file system failed.
    Io,
    /// The file at the path is not the one the hub opened: deleted, moved or replaced.
    Moved,
    /// The file is the one the hub opened, but its content was written over in place (a `cp`
    /// of a backup over it): its header no longer carries the mark the hub wrote at start.
    Overwritten,
}

impl Fault {
    /// The name `/ready`, `/metrics` and the error codes use.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Full => "disk_full",
            Fault::ReadOnly => "read_only",
            Fault::Io => "io_error",
            Fault::Moved => "moved",
            Fault::Overwritten => "overwritten",
        }
    }

    /// The fault an SQLite error is, by its code; `None` for any other error.
    pub(super) fn of(error: &rusqlite::Error) -> Option<Fault> {
        match error.sqlite_error_code()? {
            rusqlite::ErrorCode::DiskFull => Some(Fault::Full),
            rusqlite::ErrorCode::ReadOnly => Some(Fault::ReadOnly),
            rusqlite::ErrorCode::SystemIoFailure | rusqlite::ErrorCode::CannotOpen => {
                Some(Fault::Io)
            }
            _ => None,
        }
    }

    /// Whether the connection that met it is replaced (a read-only or broken connection stays
    /// so; a full disk does not spoil one).
    pub(super) fn spoils_connection(self) -> bool {
        matches!(self, Fault::ReadOnly | Fault::Io)
    }
}

/// The last fault a write met, until a write succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSeen {
    pub fault: Fault,
    /// When it was first met (wall clock), since the last successful write.
    pub since: OffsetDateTime,
    /// What SQLite or the check said.
    pub detail: String,
}

/// Shared by every connection of a process to one database.
#[derive(Debug, Default)]
pub(crate) struct DbHealth {
    last: Mutex<Option<FaultSeen>>,
    /// The device and inode of the database's `-wal` and `-shm` as the process first opened
    /// them: only those are ever moved aside, never another process's.
    companions: OnceLock<[Option<(u64, u64)>; 2]>,
    /// `Some` from the moment the file at the path was found deleted or replaced: the old `-wal`
    /// and `-shm` moved aside (where each went, from where), and every connection of the process
    /// closes without checkpointing. `None` again once they are put back beside their file.
    aside: Mutex<Option<Vec<(PathBuf, PathBuf)>>>,
    /// The mark the daemon wrote into the file's header at start ([`ContentMark`]); `None` in
    /// processes that never claimed the file (the CLI's commands).
    mark: Mutex<Option<ContentMark>>,
    /// Set for good once the file was found written over in place: the fault outlives any
    /// write, and the old journal is never put back beside the file.
    overwritten: std::sync::atomic::AtomicBool,
}

/// What identifies the content of the file the daemon serves: a random number in the header's
/// `application_id` (bytes 68–71 of the file, big-endian), written at start and changed again by
/// every commit of the daemon, so that each checkpoint that reaches the file brings a number no
/// earlier state of the file carried. SQLite writes the database file only when a checkpoint
/// copies the WAL into it, so the file can only carry the number it was last seen with or one
/// committed since; every look at the file (before each commit, after each commit and each
/// checkpoint of the process, on the timers) forgets those older than what it finds there.
/// A copy written over the file in place (`cp x hub.sqlite` keeps the inode, so the
/// device-and-inode check sees nothing) carries the number of the moment it was made: the hub's
/// own backups carry 0, and a copy made by any tool (`sqlite3 .backup`, `VACUUM INTO`, `cp` of
/// the running file) before a checkpoint the hub has since seen carries a number it forgot.
/// A copy made after the last checkpoint is the file as it still is (or its content as the WAL
/// above it shows it), which the WAL reads on top of as it would on the file itself.
#[derive(Debug, Clone)]
pub(super) struct ContentMark {
    /// The numbers the file may carry now, oldest first: the one it was last seen with, then
    /// each one committed (or about to be) since.
    accepted: std::collections::VecDeque<[u8; 4]>,
}

impl ContentMark {
    /// The mark of a file that carried `previous` before this start wrote `current`.
    pub(super) fn new(previous: Option<[u8; 4]>, current: [u8; 4]) -> ContentMark {
        ContentMark {
            accepted: previous.into_iter().chain([current]).collect(),
        }
    }

    /// Whether `found` may be in the file; the numbers older than it are forgotten.
    fn admit(&mut self, found: Option<[u8; 4]>) -> bool {
        let Some(at) = found.and_then(|found| self.accepted.iter().position(|m| *m == found))
        else {
            return false;
        };
        self.accepted.drain(..at);
        true
    }
}

/// A random mark, never 0 (the hub's own backups) and never one of `taken`.
pub(super) fn fresh_mark(taken: &[[u8; 4]]) -> Result<[u8; 4]> {
    let mut mark = [0u8; 4];
    while mark == [0; 4] || taken.contains(&mark) {
        getrandom::fill(&mut mark).map_err(|error| StoreError::Io {
            context: "нет случайных чисел для метки базы".into(),
            source: std::io::Error::other(error.to_string()),
        })?;
    }
    Ok(mark)
}

impl DbHealth {
    pub(crate) fn current(&self) -> Option<FaultSeen> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records a fault; logged when it is new or of another kind (then `true`).
    pub(super) fn record(&self, fault: Fault, detail: String) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.as_ref().is_none_or(|seen| seen.fault != fault) {
            tracing::error!(fault = fault.name(), %detail, "the database cannot be written");
            *last = Some(FaultSeen {
                fault,
                since: OffsetDateTime::now_utc(),
                detail,
            });
            return true;
        }
        false
    }

    /// A write succeeded: whatever was wrong is over (a file written over in place stays so
    /// until a restart).
    pub(super) fn clear(&self) {
        if self.is_overwritten() {
            return;
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(seen) = last.take() {
            tracing::info!(
                fault = seen.fault.name(),
                "the database can be written again"
            );
        }
    }
}

impl DbHealth {
    /// Records the database's `-wal` and `-shm` as this process opened them (its first
    /// connection's; later calls change nothing).
    pub(super) fn remember_companions(&self, db: &Path) {
        let _ = self
            .companions
            .set(COMPANIONS.map(|suffix| identity_of(&companion(db, suffix))));
    }

    /// Whether the process opened the database itself (its `-wal` and `-shm` are known).
    pub(super) fn knows_companions(&self) -> bool {
        self.companions.get().is_some()
    }

    /// Whether the file was found deleted or replaced and its `-wal`/`-shm` are still aside:
    /// no connection may checkpoint or write.
    pub(super) fn set_aside(&self) -> bool {
        self.aside
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Moves the old `-wal` and `-shm` of `db` (those this process opened, by device and inode;
    /// a file there of another is left alone) to `<base>.old-wal` / `<base>.old-shm`, once per
    /// loss; `rescue` runs first, under the same lock, and names `base` (the rescue copy).
    /// The process's connections keep reading them through their descriptors; what is at the
    /// path now never meets them, neither in this process nor after a restart.
    pub(super) fn move_companions_aside(&self, db: &Path, rescue: impl FnOnce() -> PathBuf) {
        let mut aside = self.aside.lock().unwrap_or_else(|p| p.into_inner());
        if aside.is_some() {
            return;
        }
        let base = rescue();
        let recorded = self.companions.get().copied().unwrap_or_default();
        let mut moved = Vec::new();
        for (suffix, opened) in COMPANIONS.into_iter().zip(recorded) {
            let original = companion(db, suffix);
            if opened.is_none() || identity_of(&original) != opened {
                continue;
            }
            // Beside the rescue copy, under a name SQLite never reads as a journal; when that
            // folder cannot take it (another file system), beside the database.
            let targets = [
                PathBuf::from(format!("{}.old{suffix}", base.display())),
                PathBuf::from(format!("{}.replaced", original.display())),
            ];
            let renamed = targets.into_iter().find_map(|target| {
                match std::fs::rename(&original, &target) {
                    Ok(()) => Some(target),
                    Err(error) => {
                        tracing::warn!(from = %original.display(), to = %target.display(), %error, "cannot move the old database companion aside");
                        None
                    }
                }
            });
            match renamed {
                Some(target) => {
                    tracing::error!(from = %original.display(), to = %target.display(), "the replaced database's old journal is moved aside, so that it never meets the file now at the path");
                    moved.push((target, original));
                }
                None => tracing::error!(
                    file = %original.display(),
                    "the replaced database's old journal could not be moved aside: remove it before the hub starts again, or it is replayed into the file now at the path"
                ),
            }
        }
        *aside = Some(moved);
    }

    /// The file the process opened is back at its path: its `-wal` and `-shm` are put back
    /// beside it (never over a file there now). `false` while they cannot be: the file then
    /// takes no write until a restart.
    pub(super) fn put_companions_back(&self) -> bool {
        if self.is_overwritten() {
            return false;
        }
        let mut aside = self.aside.lock().unwrap_or_else(|p| p.into_inner());
        let Some(moved) = aside.as_mut() else {
            return true;
        };
        while let Some((target, original)) = moved.pop() {
            if let Err(error) = rename_no_replace(&target, &original) {
                tracing::error!(from = %target.display(), to = %original.display(), %error, "the database file is back, but its journal cannot be put back beside it: restart the hub");
                moved.push((target, original));
                return false;
            }
        }
        *aside = None;
        true
    }
}

impl DbHealth {
    /// From now on the file's content is checked against `mark` before every commit and on
    /// the timers.
    pub(super) fn set_mark(&self, mark: ContentMark) {
        *self.mark.lock().unwrap_or_else(|p| p.into_inner()) = Some(mark);
    }

    /// Whether this process serves the file (it wrote its mark into it: the daemon).
    pub(super) fn serves(&self) -> bool {
        self.mark
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Whether the file was found written over in place (for good, until a restart).
    pub(super) fn is_overwritten(&self) -> bool {
        self.overwritten.load(std::sync::atomic::Ordering::Acquire)
    }

    /// A new mark for the commit about to be made (`None` in a process that never claimed the
    /// file): accepted from now on, before the commit, since the checkpoint SQLite runs inside
    /// a commit may copy it into the file before the commit returns. A mark whose commit then
    /// fails is in no copy, and is forgotten with the others.
    pub(super) fn next_mark(&self) -> Result<Option<[u8; 4]>> {
        let mut guard = self.mark.lock().unwrap_or_else(|p| p.into_inner());
        let Some(mark) = guard.as_mut() else {
            return Ok(None);
        };
        let taken: Vec<[u8; 4]> = mark.accepted.iter().copied().collect();
        let next = fresh_mark(&taken)?;
        mark.accepted.push_back(next);
        Ok(Some(next))
    }

    /// After a commit or a checkpoint: the marks older than the one the file carries now are
    /// forgotten (a file found with none it may carry is left to the next check to report).
    pub(super) fn observe(&self, path: &Path) {
        let mut guard = self.mark.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(mark), Ok(found)) = (guard.as_mut(), read_mark(path)) {
            mark.admit(found);
        }
    }

    /// Whether the file at `path` still carries a mark it may carry (read through the
    /// descriptor kept for the life of the process: closing another one of the file would drop
    /// SQLite's locks). An `Overwritten` error otherwise; nothing to check in a process that
    /// never set a mark.
    pub(super) fn check_content(&self, path: &Path) -> Result<()> {
        let mut guard = self.mark.lock().unwrap_or_else(|p| p.into_inner());
        let Some(mark) = guard.as_mut() else {
            return Ok(());
        };
        if !self.is_overwritten() && mark.admit(read_mark(path)?) {
            return Ok(());
        }
        self.overwritten
            .store(true, std::sync::atomic::Ordering::Release);
        Err(StoreError::Unavailable {
            fault: Fault::Overwritten,
            detail: format!(
                "{} перезаписан на месте (копией, сделанной раньше: cp, sqlite3 .backup, VACUUM INTO или копия хаба): в нём уже не то, что записал хаб",
                path.display()
            ),
        })
    }
}

/// The four bytes of the header's `application_id` in the file at `path` now; `None` when the
/// file is shorter than a header (being written over right now), or is not a WAL database: the
/// file the hub serves says WAL in its header's format bytes for good (sqlite.org/fileformat.html,
/// 1.3.3: bytes 18 and 19 are 2 for WAL, 1 for a rollback journal), while `VACUUM INTO` writes a
/// rollback-journal file (vacuum.c sets the version to 2 only on the database it vacuums in
/// place) that carries the newest committed mark, so its mark alone would not tell it from the
/// file; the hub's own backups are rollback-journal files too.
pub(super) fn read_mark(path: &Path) -> Result<Option<[u8; 4]>> {
    use std::os::unix::fs::FileExt;
    let file = super::dbfile::database_file(path)?;
    let mut header = [0u8; super::dbfile::MARK_OFFSET as usize + 4];
    match file.read_exact_at(&mut header, 0) {
        Ok(()) if header[FORMAT_BYTES..FORMAT_BYTES + 2] != [2, 2] => Ok(None),
        Ok(()) => {
            let mut bytes = [0u8; 4];
            bytes.copy_from_slice(&header[super::dbfile::MARK_OFFSET as usize..]);
            Ok(Some(bytes))
        }
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(source) => Err(StoreError::Io {
            context: format!("не удалось прочитать заголовок {}", path.display()),
            source,
        }),
    }
}

/// Where the header's file format write and read versions are (sqlite.org/fileformat.html, 1.3:
/// "18 1 File format write version. 1 for legacy; 2 for WAL", "19 1 File format read version").
const FORMAT_BYTES: usize = 18;

/// The journal files SQLite keeps beside a database in WAL mode.
const COMPANIONS: [&str; 2] = ["-wal", "-shm"];

/// `<db>-wal`, `<db>-shm`.
pub(super) fn companion(db: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", db.display()))
}

/// Renames `from` to `to` unless `to` exists (atomically: `RENAME_NOREPLACE`).
fn rename_no_replace(from: &Path, to: &Path) -> std::io::Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        from,
        rustix::fs::CWD,
        to,
        rustix::fs::RenameFlags::NOREPLACE,
    )
    .map_err(std::io::Error::from)
}

/// The device and inode of the file at `path` now; `None` when there is none.
pub(super) fn identity_of(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether the file at `path` is still `opened`: a `Moved` error naming the path otherwise.
pub(super) fn check_identity(path: &Path, opened: (u64, u64)) -> Result<()> {
    match identity_of(path) {
        Some(now) if now == opened => Ok(()),
        now => Err(StoreError::Unavailable {
            fault: Fault::Moved,
            detail: match now {
                None => format!("файла {} больше нет", path.display()),
                Some(_) => format!("{} — уже другой файл", path.display()),
            },
        }),
    }
}
