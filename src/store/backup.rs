//! Copies of the database in `backups/` beside it. Online backups (manual, periodic) go through
//! SQLite's online backup API on a read connection: consistent, complete (rows still in the WAL
//! included), taken while others write. A migration's backup, taken under the write lock, is a
//! plain copy of the checkpointed file when it can be (see [`MigrationCopy`]), several times
//! faster than the page-by-page backup API, and the backup API otherwise.
//!
//! Files are written under a temporary name starting with `.`, then renamed, so `backups/` never
//! shows a half-written copy under a final name.

use super::dbfile::database_file;
use super::{Result, Store, StoreError, data_dir_of, io_error};
use crate::domain::time::backup_stamp;
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// How much of the database a backup reads through a memory map (SQLite caps it at its
/// compile-time maximum, 2 GiB by default; the rest is read with pread).
const BACKUP_MMAP_BYTES: i64 = 1 << 40;

/// Why a backup is made; it shows in the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BackupKind {
    /// Before migrating from schema version `from` (of v4: its revision `revision`):
    /// `<stamp>-schema-v<from>.sqlite`, `<stamp>-schema-v4r<revision>.sqlite`, never pruned.
    Migration { from: u32, revision: u32 },
    /// Asked for by an operator (`jira-hub backup`): `<stamp>-manual.sqlite`.
    Manual,
    /// The daemon's daily copy: `<stamp>-periodic.sqlite`, the newest `backup_keep` kept.
    Periodic,
    /// What the daemon's connection still reads of a database file deleted or replaced under
    /// it: `<stamp>-rescued.sqlite`, never pruned.
    Rescued,
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

/// When a backup was made, by the time its name starts with (`20261205-091500-…`).
fn made_at(path: &Path) -> Option<OffsetDateTime> {
    let stamp = path.file_name()?.to_str()?.get(..15)?;
    time::PrimitiveDateTime::parse(
        stamp,
        time::macros::format_description!("[year][month][day]-[hour][minute][second]"),
    )
    .ok()
    .map(|t| t.assume_utc())
}

/// When the newest backup of `backups/` beside `db_path` was made, whatever made it (the daily
/// timer, `jira-hub backup`, a migration, a restore, a rescue): every one is a whole, checked
/// copy (partial copies are hidden files until renamed). `None`: there is none.
/// A database that is itself a file of `backups/` (`status --db backups/…`) has its fellows there,
/// not in a `backups/backups/` no one makes.
pub(crate) fn newest_backup_at(db_path: &Path) -> Option<OffsetDateTime> {
    let dir = if is_in_backups(db_path) {
        data_dir_of(db_path)
    } else {
        backups_dir(db_path)
    };
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.') && n.ends_with(".sqlite"))
        })
        .filter_map(|p| made_at(&p))
        .max()
}

/// Whether `db_path` lies in a folder named `backups` (a backup opened for a look).
pub(crate) fn is_in_backups(db_path: &Path) -> bool {
    db_path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|folder| folder == "backups")
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
    let (dir, partial, target) = backup_names(db_path, kind, now);
    finish(&dir, &partial, &target, copy_into(reader, &partial))
}

/// The folder, the temporary name and the final name of a new backup.
fn backup_names(
    db_path: &Path,
    kind: BackupKind,
    now: OffsetDateTime,
) -> (PathBuf, PathBuf, PathBuf) {
    let dir = backups_dir(db_path);
    let stem = match kind {
        BackupKind::Migration { from, revision } => format!(
            "{}-schema-{}",
            backup_stamp(now),
            super::schema::schema_label(from, revision)
        ),
        BackupKind::Manual => format!("{}-manual", backup_stamp(now)),
        BackupKind::Periodic => format!("{}-{PERIODIC_SUFFIX}", backup_stamp(now)),
        BackupKind::Rescued => format!("{}-rescued", backup_stamp(now)),
    };
    if matches!(kind, BackupKind::Migration { .. }) {
        remove_stale_migration_partials(&dir);
    }
    let (partial, target) = free_name(&dir, &stem);
    (dir, partial, target)
}

/// Gives a written and synced copy its final name (and syncs the folder), or removes it when
/// writing it failed.
fn finish(dir: &Path, partial: &Path, target: &Path, copied: Result<()>) -> Result<PathBuf> {
    let renamed = copied.and_then(|()| {
        std::fs::rename(partial, target).map_err(io_error(format!(
            "не удалось переименовать копию в {}",
            target.display()
        )))?;
        sync_dir(dir)
    });
    if let Err(error) = renamed {
        let _ = std::fs::remove_file(partial);
        return Err(error);
    }
    Ok(target.to_path_buf())
}

/// How a migration's backup will be made, decided under the write lock before the migration
/// writes anything.
///
/// When the database is in WAL mode and a checkpoint moved every committed frame into the main
/// file, that file alone holds every committed row, and nobody can commit another while the
/// migrating connection holds the write lock; the migration's own uncommitted pages go to the WAL
/// only. So the file can be copied as it is (`copy_file_range`, no page-by-page work) on another
/// thread while the migration runs, and the migration commits once the copy is durable. Otherwise
/// (a reader of another process pins older frames, a rollback-journal database) the copy is made
/// through SQLite's backup API before the migration writes, as for any online backup.
pub(super) enum MigrationCopy {
    /// Copy the first `bytes` of the checkpointed file.
    File {
        db_path: PathBuf,
        bytes: u64,
        from: u32,
        revision: u32,
        now: OffsetDateTime,
    },
    /// Through the backup API, reading with this connection.
    Sqlite {
        reader: Connection,
        db_path: PathBuf,
        from: u32,
        revision: u32,
        now: OffsetDateTime,
    },
}

impl MigrationCopy {
    /// Checkpoints the WAL and decides. Call it while holding the write lock (a `BEGIN
    /// IMMEDIATE` transaction that has written nothing yet), with a read connection to the file.
    pub(super) fn plan(
        reader: Connection,
        db_path: &Path,
        (from, revision): (u32, u32),
        now: OffsetDateTime,
    ) -> Result<MigrationCopy> {
        let db_path = db_path.to_path_buf();
        let checkpointed = checkpoint_complete(&db_path)?;
        // The size of the database as committed: the pages a copy must hold.
        let bytes: u64 = reader.query_row(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
            [],
            |row| row.get(0),
        )?;
        let on_disk = std::fs::metadata(&db_path)
            .map_err(io_error(format!(
                "не удалось прочитать {}",
                db_path.display()
            )))?
            .len();
        if checkpointed && on_disk >= bytes {
            Ok(MigrationCopy::File {
                db_path,
                bytes,
                from,
                revision,
                now,
            })
        } else {
            Ok(MigrationCopy::Sqlite {
                reader,
                db_path,
                from,
                revision,
                now,
            })
        }
    }

    /// Whether the copy may run while the migration writes (a file copy), or must be made first.
    pub(super) fn concurrent(&self) -> bool {
        matches!(self, MigrationCopy::File { .. })
    }

    /// Writes the backup (`<stamp>-schema-v<from>.sqlite`), durable, and returns its path.
    pub(super) fn write(self) -> Result<PathBuf> {
        match self {
            MigrationCopy::Sqlite {
                reader,
                db_path,
                from,
                revision,
                now,
            } => write_backup(
                &reader,
                &db_path,
                BackupKind::Migration { from, revision },
                now,
            ),
            MigrationCopy::File {
                db_path,
                bytes,
                from,
                revision,
                now,
            } => {
                let (dir, partial, target) =
                    backup_names(&db_path, BackupKind::Migration { from, revision }, now);
                let copied = copy_file(&db_path, bytes, &partial)
                    .and_then(|()| verify_copy(&partial, bytes, from))
                    .and_then(|()| sync_file(&partial));
                finish(&dir, &partial, &target, copied)
            }
        }
    }
}

/// Runs a passive checkpoint on a connection of its own (the migrating one is inside its
/// transaction) and tells whether every committed frame of the WAL is now in the main file.
/// False for a database that is not in WAL mode.
fn checkpoint_complete(db_path: &Path) -> Result<bool> {
    let conn = Connection::open_with_flags(
        db_path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // PASSIVE: the write lock is ours, so a mode that waits for it would wait for ever.
    let (busy, log, done): (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?;
    Ok(busy == 0 && log >= 0 && log == done)
}

/// Copies the first `bytes` of the database file to a new file `partial` (mode 0600: the copy
/// holds the tokens), in the kernel (`copy_file_range`), and marks the copy as a rollback-journal
/// database, as the backup API's copies are.
fn copy_file(db_path: &Path, bytes: u64, partial: &Path) -> Result<()> {
    let failed = |what: &str, path: &Path| io_error(format!("{what} {}", path.display()));
    let _ = std::fs::remove_file(partial);
    let destination = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(partial)
        .map_err(failed("не удалось создать", partial))?;
    {
        let source = database_file(db_path)?;
        copy_syncing(source, bytes, &destination)
            .map_err(failed("не удалось скопировать базу в", partial))?;
    }
    // Bytes 18 and 19 of the header, the file format's write and read versions: 2 is WAL, 1 the
    // rollback journal, as SQLite's `journal_mode=DELETE` writes them.
    let mut header = [0u8; 20];
    destination
        .read_exact_at(&mut header, 0)
        .map_err(failed("не удалось прочитать", partial))?;
    if !header.starts_with(b"SQLite format 3\0") {
        return Err(StoreError::Io {
            context: format!("копия {} не база SQLite", partial.display()),
            source: std::io::Error::other("заголовок"),
        });
    }
    if header[18] == 2 && header[19] == 2 {
        destination
            .write_all_at(&[1, 1], 18)
            .map_err(failed("не удалось записать", partial))?;
    }
    // Nor the running hub's mark (see `health::ContentMark`).
    destination
        .write_all_at(&[0; 4], super::dbfile::MARK_OFFSET)
        .map_err(failed("не удалось записать", partial))?;
    Ok(())
}

/// The copy is made in pieces of this size; the disk starts writing each piece while the next one
/// is copied (the kernel would otherwise start only once gigabytes are dirty, or at the final
/// fsync), so the final fsync waits for little more than the last piece.
const COPY_PIECE_BYTES: u64 = 64 << 20;

/// Copies the first `bytes` of `source` to `destination` in the kernel (`copy_file_range`, at
/// explicit offsets: the source's file position is never used), starting the write-back of each
/// piece once it is copied (`POSIX_FADV_DONTNEED` starts it without waiting, and drops the copy's
/// pages that are already on disk from the cache). The caller still syncs the file.
fn copy_syncing(source: &File, bytes: u64, destination: &File) -> std::io::Result<()> {
    let (copied_to, to_write) = std::sync::mpsc::channel::<u64>();
    std::thread::scope(|scope| {
        // Dropped when this closure returns, however it returns: the thread below then ends.
        let copied_to = copied_to;
        // Starting the write-back is work (the filesystem allocates the blocks then): a second
        // thread does it while this one copies the next piece.
        scope.spawn(move || {
            while let Ok(mut end) = to_write.recv() {
                while let Ok(later) = to_write.try_recv() {
                    end = later;
                }
                // Everything copied so far: starts writing the newest pieces, and drops the
                // earlier ones already on disk from the cache, so the copy takes a few pieces of
                // memory, not the whole database's worth that the kernel would have to reclaim
                // from others. Advice only: the final fsync writes whatever it did not start.
                let _ = rustix::fs::fadvise(
                    destination,
                    0,
                    std::num::NonZeroU64::new(end),
                    rustix::fs::Advice::DontNeed,
                );
            }
        });
        let mut read_at = 0u64;
        let mut written_at = 0u64;
        let mut piece_start = 0u64;
        while read_at < bytes {
            let want = (bytes - read_at).min(COPY_PIECE_BYTES - (read_at - piece_start));
            let len = usize::try_from(want).unwrap_or(usize::MAX);
            let copied = match rustix::fs::copy_file_range(
                source,
                Some(&mut read_at),
                destination,
                Some(&mut written_at),
                len,
            ) {
                Ok(copied) => copied,
                // A filesystem (or a kernel) that cannot copy between these files: read and
                // write.
                Err(
                    rustix::io::Errno::XDEV
                    | rustix::io::Errno::INVAL
                    | rustix::io::Errno::NOSYS
                    | rustix::io::Errno::OPNOTSUPP,
                ) => {
                    let mut buffer = vec![0; len.min(1 << 20)];
                    let got = source.read_at(&mut buffer, read_at)?;
                    destination.write_all_at(&buffer[..got], written_at)?;
                    read_at += got as u64;
                    written_at += got as u64;
                    got
                }
                Err(error) => return Err(error.into()),
            };
            if copied == 0 {
                return Err(std::io::Error::other(format!(
                    "копия короче базы: {read_at} байт из {bytes}"
                )));
            }
            if read_at - piece_start >= COPY_PIECE_BYTES {
                let _ = copied_to.send(read_at);
                piece_start = read_at;
            }
        }
        Ok(())
    })
}

/// Opens the copy with SQLite, read-only: it must be a database of `bytes` bytes at schema
/// version `from`.
fn verify_copy(partial: &Path, bytes: u64, from: u32) -> Result<()> {
    let conn = Connection::open_with_flags(
        partial,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let (size, version): (u64, String) = conn.query_row(
        "SELECT (SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()),
                (SELECT value FROM setting WHERE key = 'schema_version')",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    if size != bytes || version.trim().trim_matches('"') != from.to_string() {
        return Err(StoreError::Io {
            context: format!("копия {} не совпадает с базой", partial.display()),
            source: std::io::Error::other(format!(
                "{size} байт из {bytes}, schema_version {version} вместо {from}"
            )),
        });
    }
    Ok(())
}

pub(super) fn sync_file(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(io_error(format!(
            "не удалось записать на диск {}",
            path.display()
        )))
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
pub(super) fn free_name(dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
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

/// Lets `reader` read the file it copies through a memory map: one pread per page is several
/// times slower for a large copy. Only for a file nobody serves (a backup being restored, the
/// CLI's copy of a database no daemon of this process holds): a file cut short under a map (a
/// `cp` over the live database truncates it first) kills the process with SIGBUS on the next
/// read past the new end (sqlite.org/mmap.html), and the daemon would die with its WAL beside
/// the copy, for the next start to replay into it.
pub(super) fn map_for_copy(reader: &Connection) -> Result<()> {
    reader.pragma_update(None, "mmap_size", BACKUP_MMAP_BYTES)?;
    Ok(())
}

pub(super) fn copy_into(reader: &Connection, partial: &Path) -> Result<()> {
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
    // A copy never carries the running hub's mark: put back over the live file in place, it is
    // found written over (see `health::ContentMark`).
    destination.pragma_update(None, "application_id", 0)?;
    destination.pragma_update(None, "journal_mode", "DELETE")?;
    destination.close().map_err(|(_, error)| error)?;
    // The copy holds the tokens: readable by the hub's user only.
    std::fs::set_permissions(partial, std::fs::Permissions::from_mode(0o600)).map_err(io_error(
        format!("не удалось записать на диск {}", partial.display()),
    ))?;
    sync_file(partial)
}

pub(super) fn sync_dir(dir: &Path) -> Result<()> {
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
        let newest_at = newest.as_deref().and_then(made_at);
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

    /// A copy of what this connection reads, made through it (not a new connection: the path
    /// may name another file, or none): the database the hub served when its file was deleted
    /// or replaced under it, every acknowledged write included.
    pub(super) fn rescue_copy(&self, now: OffsetDateTime) -> Result<PathBuf> {
        write_backup(&self.conn, &self.path, BackupKind::Rescued, now)
    }

    /// An online backup now (`jira-hub backup`).
    pub(crate) fn backup_now(&self, kind: BackupKind, now: OffsetDateTime) -> Result<PathBuf> {
        write_backup(&self.reader()?, &self.path, kind, now)
    }
}

/// Whether this process now holds the database file itself exclusively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileLock {
    Held,
    /// Another process holds it: the same file under another name (a hard or symbolic link).
    HeldElsewhere,
    /// Not taken: the file is on a network file system, where the lock would be SQLite's own.
    Skipped(String),
}

/// Locks the database file itself (`flock`, exclusive, not waiting) through the descriptor kept
/// for the life of the process, so that two daemons cannot serve one file reached through two
/// names (the data folder's lock file belongs to the folder, and a hard link has another one).
/// On Linux, `flock` locks and the `fcntl` byte-range locks SQLite takes on the same file do not
/// interact (flock(2), "Since Linux 2.0 … there is no interaction between the types of lock
/// placed by flock() and fcntl(2)"), except over NFS and SMB, where the kernel emulates `flock`
/// with whole-file byte-range locks (and on SMB makes them mandatory): there it is not taken.
pub(crate) fn lock_database_file(db_path: &Path) -> Result<FileLock> {
    const NETWORK_FILE_SYSTEMS: [(i64, &str); 4] = [
        (0x6969, "NFS"),
        (0x517B, "SMB"),
        (0xFF53_4D42, "CIFS"),
        (0xFE53_4D42, "SMB2"),
    ];
    let file = database_file(db_path)?;
    let kind = rustix::fs::fstatfs(file)
        // `f_type`'s width differs between architectures.
        .map(|stat| {
            #[allow(clippy::useless_conversion)]
            i64::from(stat.f_type)
        })
        .unwrap_or_default();
    if let Some((_, name)) = NETWORK_FILE_SYSTEMS
        .iter()
        .find(|(magic, _)| *magic == kind)
    {
        return Ok(FileLock::Skipped(format!(
            "{} is on {name}: the database file itself is not locked (only its folder is)",
            db_path.display()
        )));
    }
    match file.try_lock() {
        Ok(()) => Ok(FileLock::Held),
        Err(std::fs::TryLockError::WouldBlock) => Ok(FileLock::HeldElsewhere),
        Err(std::fs::TryLockError::Error(source)) => Err(StoreError::Io {
            context: format!("не удалось заблокировать {}", db_path.display()),
            source,
        }),
    }
}
