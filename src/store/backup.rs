//! Copies of the database in `backups/` beside it, made through SQLite's online backup API on a
//! read connection: consistent, complete (rows still in the WAL included), taken while others
//! write, and without ever opening the database file with `std::fs`.
//!
//! Files are written under a temporary name starting with `.`, then renamed, so `backups/` never
//! shows a half-written copy under a final name.

use super::{Result, Store, StoreError, data_dir_of, io_error};
use crate::domain::time::backup_stamp;
use rusqlite::Connection;
use rusqlite::backup::{Backup, StepResult};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// How much of the database a backup reads through a memory map (SQLite caps it at its
/// compile-time maximum, 2 GiB by default; the rest is read with pread).
const BACKUP_MMAP_BYTES: i64 = 1 << 40;

/// Why a backup is made; it shows in the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BackupKind {
    /// Before migrating from schema version `from`: `<stamp>-schema-v<from>.sqlite`, never pruned.
    Migration { from: u32 },
    /// Asked for by an operator (`jira-hub backup`): `<stamp>-manual.sqlite`.
    Manual,
    /// The daemon's daily copy: `<stamp>-periodic.sqlite`, the newest `backup_keep` kept.
    Periodic,
}

const PERIODIC_SUFFIX: &str = "periodic";

/// The periodic backups in `backups/`, oldest first (their names start with the time).
fn periodic_backups(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        !n.starts_with('.')
                            && n.contains(&format!("-{PERIODIC_SUFFIX}"))
                            && n.ends_with(".sqlite")
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

pub(crate) fn backups_dir(db_path: &Path) -> PathBuf {
    data_dir_of(db_path).join("backups")
}

/// Copies the database that `reader` reads into a new file of `backups/` and returns its path.
pub(super) fn write_backup(
    reader: &Connection,
    db_path: &Path,
    kind: BackupKind,
    now: OffsetDateTime,
) -> Result<PathBuf> {
    let dir = backups_dir(db_path);
    let stem = match kind {
        BackupKind::Migration { from } => format!("{}-schema-v{from}", backup_stamp(now)),
        BackupKind::Manual => format!("{}-manual", backup_stamp(now)),
        BackupKind::Periodic => format!("{}-{PERIODIC_SUFFIX}", backup_stamp(now)),
    };
    if matches!(kind, BackupKind::Migration { .. }) {
        remove_stale_migration_partials(&dir);
    }
    let (partial, target) = free_name(&dir, &stem);
    let copied = copy_into(reader, &partial).and_then(|()| {
        std::fs::rename(&partial, &target).map_err(io_error(format!(
            "не удалось переименовать копию в {}",
            target.display()
        )))?;
        sync_dir(&dir)
    });
    if let Err(error) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(error);
    }
    Ok(target)
}

/// Half-written migration backups of a process that died (a full disk, a kill). Only the
/// process holding the database's write lock writes one, so any found now is stale.
fn remove_stale_migration_partials(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.contains("-schema-v") && name.ends_with(".sqlite.partial")
        {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => {
                    tracing::warn!(file = %name, "removed a half-written migration backup left by a stopped process")
                }
                Err(error) => {
                    tracing::warn!(file = %name, %error, "cannot remove a stale migration backup")
                }
            }
        }
    }
}

/// A name in `dir` that no file has yet: `<stem>.sqlite`, else `<stem>-2.sqlite`, …; with the
/// temporary name it is written under first.
fn free_name(dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
    let mut n = 1;
    loop {
        let name = if n == 1 {
            format!("{stem}.sqlite")
        } else {
            format!("{stem}-{n}.sqlite")
        };
        let target = dir.join(&name);
        if !target.exists() {
            return (dir.join(format!(".{name}.partial")), target);
        }
        n += 1;
    }
}

fn copy_into(reader: &Connection, partial: &Path) -> Result<()> {
    // Reading the pages through a memory map instead of one pread per page makes a large copy
    // several times faster. The hub never vacuums or truncates its database, so the mapped file
    // does not shrink under the copy.
    reader.pragma_update(None, "mmap_size", BACKUP_MMAP_BYTES)?;
    let _ = std::fs::remove_file(partial);
    let mut destination = Connection::open(partial)?;
    // A fresh file that gets its final name only once complete and synced: a rollback journal
    // and per-page syncs would protect nothing.
    destination.pragma_update(None, "journal_mode", "OFF")?;
    destination.pragma_update(None, "synchronous", "OFF")?;
    {
        let backup = Backup::new(reader, &mut destination)?;
        // All pages in one step: one read snapshot, so the copy is consistent.
        match backup.step(-1)? {
            StepResult::Done => {}
            other => {
                return Err(StoreError::Io {
                    context: format!("копирование в {} не завершилось", partial.display()),
                    source: std::io::Error::other(format!("{other:?}")),
                });
            }
        }
    }
    destination.pragma_update(None, "journal_mode", "DELETE")?;
    destination.close().map_err(|(_, error)| error)?;
    // The copy holds the tokens: readable by the hub's user only.
    std::fs::set_permissions(partial, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::File::open(partial))
        .and_then(|f| f.sync_all())
        .map_err(io_error(format!(
            "не удалось записать на диск {}",
            partial.display()
        )))
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io_error(format!(
            "не удалось записать на диск {}",
            dir.display()
        )))
}

impl Store {
    /// The daily backup when the newest periodic one is `every` old or more (by the time in its
    /// name), then prunes periodic backups down to `keep`. Migration and manual backups are never
    /// pruned. Returns the new backup, if one was made.
    pub(crate) fn periodic_backup(
        &self,
        now: OffsetDateTime,
        every: time::Duration,
        keep: usize,
    ) -> Result<Option<PathBuf>> {
        let dir = self.backups_dir();
        let newest = periodic_backups(&dir).pop();
        let newest_at = newest
            .as_ref()
            .and_then(|p| p.file_name()?.to_str()?.get(..15).map(String::from))
            .and_then(|stamp| {
                time::PrimitiveDateTime::parse(
                    &stamp,
                    time::macros::format_description!("[year][month][day]-[hour][minute][second]"),
                )
                .ok()
                .map(|t| t.assume_utc())
            });
        if newest_at.is_some_and(|at| now - at < every) {
            return Ok(None);
        }
        let made = self.backup_now(BackupKind::Periodic, now)?;
        let all = periodic_backups(&dir);
        let excess = all.len().saturating_sub(keep.max(1));
        for old in &all[..excess] {
            std::fs::remove_file(old)
                .map_err(io_error(format!("не удалось удалить {}", old.display())))?;
        }
        Ok(Some(made))
    }

    /// An online backup now (`jira-hub backup`).
    pub(crate) fn backup_now(&self, kind: BackupKind, now: OffsetDateTime) -> Result<PathBuf> {
        write_backup(&self.reader()?, &self.path, kind, now)
    }
}
