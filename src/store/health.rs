//! The database file under a running hub (issue 18, item 5): a full disk, a file or folder made
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
use std::path::Path;
use std::sync::Mutex;
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
}

impl Fault {
    /// The name `/ready`, `/metrics` and the error codes use.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Full => "disk_full",
            Fault::ReadOnly => "read_only",
            Fault::Io => "io_error",
            Fault::Moved => "moved",
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

    /// A write succeeded: whatever was wrong is over.
    pub(super) fn clear(&self) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(seen) = last.take() {
            tracing::info!(
                fault = seen.fault.name(),
                "the database can be written again"
            );
        }
    }
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
