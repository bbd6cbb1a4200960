//! `jira-hub restore BACKUP`: a copy put in place of the database of a stopped hub, so that
//! nothing the hub acknowledged is lost under it and nothing of the old file meets the new one.
//!
//! In order: the data folder's lock and the database file's own lock are taken (a hub that
//! serves the database holds them: refused, nothing changed); the copy is checked (an SQLite
//! database of the hub, `PRAGMA integrity_check` ok, a schema this binary runs or migrates);
//! it is copied through SQLite's backup API (its own WAL, if one lies beside it, read with it)
//! into a temporary file in the data folder, synced; the current database is checkpointed (its
//! WAL emptied into it; another process still using it refuses the restore) and kept under
//! `backups/<stamp>-before-restore.sqlite`, with whatever `-wal`/`-shm` remain beside it moved
//! along under the kept name; then the copy is renamed over the path and the folders synced.
//! At no moment is there no database at the path, and a crash leaves either the old file with
//! its WAL, or the new one with none.

use super::backup::{backups_dir, copy_into, free_name, sync_dir};
use super::{LOCK_FILE, Result, StoreError, data_dir_of, health, io_error, migrations};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};
use std::time::Duration;
use time::OffsetDateTime;

/// What `restore` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Restored {
    /// Where the database that was at the path is kept now (`None`: there was none).
    pub kept: Option<PathBuf>,
    /// The copy's schema version and v4 revision.
    pub version: u32,
    pub revision: u32,
    /// Whether the next start migrates it (an older schema).
    pub migrates: bool,
    /// Whose tokens the restored database holds.
    pub tokens: RestoredTokens,
}

/// Whose tokens a restored database holds. Tokens are credentials, not data: a backup made
/// before a `tokens --rotate` holds tokens that were revoked on purpose, and putting them back
/// would let whoever held them in again and lock out the agent and clients given the new ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RestoredTokens {
    /// The tokens in force in the replaced database, written into the copy.
    Kept,
    /// The copy's own tokens, and why (no database was at the path, its tokens cannot be read,
    /// or the copy is of an older schema, which keeps its settings its own way).
    Copy(String),
}

/// How long the checkpoint of the current database waits for another process's transaction.
const IN_USE_WAIT: Duration = Duration::from_secs(5);

/// Puts the copy at `backup` in place of the database at `db` (see the module's notes).
pub(crate) fn restore(db: &Path, backup: &Path, now: OffsetDateTime) -> Result<Restored> {
    let data_dir = data_dir_of(db);
    if !data_dir.is_dir() {
        return Err(StoreError::NoFolder(data_dir));
    }
    match std::fs::metadata(backup) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => {
            return Err(StoreError::Incompatible(format!(
                "{} — не файл копии (папка или устройство)",
                backup.display()
            )));
        }
        Err(source) => {
            return Err(StoreError::Io {
                context: format!("не удалось прочитать копию {}", backup.display()),
                source,
            });
        }
    }
    super::access::check(backup, super::access::Need::Read)?;
    super::access::check(db, super::access::Need::Write)?;
    if health::identity_of(backup).is_some()
        && health::identity_of(backup) == health::identity_of(db)
    {
        return Err(StoreError::Incompatible(format!(
            "{} — это и есть база {}: восстанавливать нечего",
            backup.display(),
            db.display()
        )));
    }
    // Held until the copy is in place: a hub started meanwhile is refused by it.
    let _folder_lock = lock_folder(db, &data_dir)?;
    if db.exists() {
        match super::lock_database_file(db)? {
            super::FileLock::HeldElsewhere => return Err(serving(db, "её файл")),
            super::FileLock::Held | super::FileLock::Skipped(_) => {}
        }
    }
    let (version, revision, migrates) = check_copy(backup)?;

    let partial = data_dir.join(format!(
        ".{}.restore.partial",
        db.file_name()
            .map_or_else(|| "hub.sqlite".into(), |n| n.to_string_lossy().into_owned())
    ));
    let copied = read_only(backup)
        .and_then(|reader| {
            super::backup::map_for_copy(&reader)?;
            copy_into(&reader, &partial)
        })
        .and_then(|()| carry_issued_ids(db, &partial))
        .and_then(|()| carry_tokens(db, &partial, version));
    let tokens = match copied {
        Ok(tokens) => tokens,
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            return Err(error);
        }
    };
    let placed = keep_current(db, now).and_then(|kept| {
        std::fs::rename(&partial, db).map_err(io_error(format!(
            "не удалось поставить копию на место {}",
            db.display()
        )))?;
        sync_dir(&data_dir)?;
        Ok(kept)
    });
    match placed {
        Ok(kept) => Ok(Restored {
            kept,
            version,
            revision,
            migrates,
            tokens,
        }),
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            Err(error)
        }
    }
}

/// The copy about to replace `db` gets the highest ids `db` issued (see `ids`): restored from
/// before batches that are gone with the replaced file, it never gives their numbers again.
/// A file that cannot be read (damaged: the reason for restoring) gives none, said in the log.
fn carry_issued_ids(db: &Path, partial: &Path) -> Result<()> {
    if !db.exists() {
        return Ok(());
    }
    let issued = match read_only(db).and_then(|conn| super::ids::issued(&conn)) {
        Ok(issued) => issued,
        Err(error) => {
            tracing::warn!(%error, database = %db.display(), "the ids the replaced database issued cannot be read; the restored copy goes on from its own");
            return Ok(());
        }
    };
    let conn = Connection::open(partial)?;
    super::ids::raise(&conn, &issued)?;
    conn.close().map_err(|(_, error)| error)?;
    super::backup::sync_file(partial)
}

/// The copy about to replace `db` gets the tokens in force in `db` ([`RestoredTokens`]). A file
/// whose tokens cannot be read (damaged: the reason for restoring) leaves the copy's, said in
/// the log and by `restore`.
fn carry_tokens(db: &Path, partial: &Path, version: u32) -> Result<RestoredTokens> {
    if !db.exists() {
        return Ok(RestoredTokens::Copy("на месте базы не было".into()));
    }
    if version < super::schema::CURRENT_SCHEMA_VERSION {
        return Ok(RestoredTokens::Copy(format!(
            "копия схемы v{version} хранит настройки по-своему"
        )));
    }
    let current = read_only(db).and_then(|conn| {
        conn.query_row(
            "SELECT value FROM setting WHERE key = ?1",
            [crate::domain::settings::TOKENS],
            |row| row.get::<_, String>(0),
        )
        .optional()
        .map_err(StoreError::from)
    });
    let current = match current {
        Ok(Some(current)) => current,
        Ok(None) => return Ok(RestoredTokens::Copy("в заменяемой базе токенов нет".into())),
        Err(error) => {
            tracing::warn!(%error, database = %db.display(), "the tokens of the replaced database cannot be read; the restored copy keeps its own");
            return Ok(RestoredTokens::Copy(format!(
                "токены заменяемой базы не читаются: {error}"
            )));
        }
    };
    let conn = Connection::open(partial)?;
    conn.execute(
        "INSERT INTO setting (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        rusqlite::params![crate::domain::settings::TOKENS, current],
    )?;
    conn.close().map_err(|(_, error)| error)?;
    super::backup::sync_file(partial)?;
    Ok(RestoredTokens::Kept)
}

/// The data folder's lock, as `serve` takes it: refused while a hub holds it.
fn lock_folder(db: &Path, data_dir: &Path) -> Result<std::fs::File> {
    lock_data_folder(data_dir)?.ok_or_else(|| {
        serving(
            db,
            &format!("файл блокировки {}", data_dir.join(LOCK_FILE).display()),
        )
    })
}

/// The data folder's lock file (`jira-hub.lock`, made when missing), locked by this process
/// (`flock`, exclusive, not waiting) for as long as the file is kept open; `None` when another
/// process holds it (a serving hub).
pub(crate) fn lock_data_folder(data_dir: &Path) -> Result<Option<std::fs::File>> {
    let lock_path = data_dir.join(LOCK_FILE);
    let lock = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io_error(format!(
            "не удалось открыть файл блокировки {}",
            lock_path.display()
        )))?;
    match lock.try_lock() {
        Ok(()) => Ok(Some(lock)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(source)) => Err(StoreError::Io {
            context: format!("не удалось заблокировать {}", lock_path.display()),
            source,
        }),
    }
}

fn serving(db: &Path, held: &str) -> StoreError {
    StoreError::Incompatible(format!(
        "на базе {} работает jira-hub serve (он держит {held}): остановите хаб, затем повторите restore; пока хаб работает, база не заменяется",
        db.display()
    ))
}

fn read_only(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(IN_USE_WAIT)?;
    Ok(conn)
}

/// The copy must be a hub's database, whole, of a schema this binary runs (as it is, or after
/// the migration the next start makes): its version, revision and whether it migrates.
fn check_copy(backup: &Path) -> Result<(u32, u32, bool)> {
    let not_a_copy = |why: String| {
        StoreError::Incompatible(format!(
            "{} не годится для восстановления: {why}",
            backup.display()
        ))
    };
    let conn = read_only(backup).map_err(|error| not_a_copy(error.to_string()))?;
    let plan = migrations::Plan::of(&conn).map_err(|error| match error {
        StoreError::Incompatible(why) => not_a_copy(why),
        StoreError::Sqlite(error)
            if error.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) =>
        {
            not_a_copy("это не база SQLite (или её заголовок повреждён)".into())
        }
        other => not_a_copy(other.to_string()),
    })?;
    let version = migrations::read_version(&conn)?;
    if version == 0 {
        return Err(not_a_copy("база пуста, в ней нет таблиц хаба".into()));
    }
    let revision = migrations::read_revision(&conn)?;
    let mut problems = Vec::new();
    {
        let mut statement = conn
            .prepare("PRAGMA integrity_check(20)")
            .map_err(|error| not_a_copy(error.to_string()))?;
        let rows = statement
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(|error| not_a_copy(error.to_string()))?;
        for row in rows {
            problems.push(row.map_err(|error| not_a_copy(error.to_string()))?);
        }
    }
    if problems != ["ok"] {
        return Err(not_a_copy(format!(
            "PRAGMA integrity_check нашёл повреждения: «{}»",
            problems.join("; ")
        )));
    }
    Ok((version, revision, plan != migrations::Plan::Current))
}

/// Moves the database at `db` (if any) to `backups/<stamp>-before-restore.sqlite` with its WAL
/// state: checkpointed into it first (refused when another process holds a transaction on it),
/// and any `-wal`/`-shm` left moved along under the kept name. The path keeps naming the old
/// file until the caller renames the copy over it (a hard link is made, not a move).
fn keep_current(db: &Path, now: OffsetDateTime) -> Result<Option<PathBuf>> {
    let exists = db.exists();
    if exists {
        checkpoint_or_refuse(db)?;
    }
    // What is left of the journal once the checkpoint's connection closed (nothing, as a rule).
    let companions: Vec<PathBuf> = ["-wal", "-shm"]
        .iter()
        .map(|suffix| health::companion(db, suffix))
        .filter(|companion| companion.exists())
        .collect();
    if !exists && companions.is_empty() {
        return Ok(None);
    }
    let dir = backups_dir(db);
    std::fs::create_dir_all(&dir)
        .map_err(io_error(format!("не удалось создать {}", dir.display())))?;
    let stem = format!("{}-before-restore", crate::domain::time::backup_stamp(now));
    let (_, kept) = free_name(&dir, &stem);
    if exists {
        std::fs::hard_link(db, &kept).map_err(io_error(format!(
            "не удалось сохранить базу {} как {}",
            db.display(),
            kept.display()
        )))?;
    }
    // A journal left without its database (the file lost) goes too: beside the copy it would be
    // replayed into it.
    for companion in companions {
        let suffix = &companion.to_string_lossy()[db.as_os_str().len()..];
        let target = health::companion(&kept, suffix);
        std::fs::rename(&companion, &target).map_err(io_error(format!(
            "не удалось перенести {} к сохранённой базе {}",
            companion.display(),
            target.display()
        )))?;
    }
    sync_dir(&dir)?;
    sync_dir(&data_dir_of(db))?;
    Ok(exists.then_some(kept))
}

/// Empties the WAL of `db` into it; refused while another process holds a transaction on it.
fn checkpoint_or_refuse(db: &Path) -> Result<()> {
    match checkpoint_all(db) {
        Ok(true) => {}
        Ok(false) => {
            return Err(StoreError::Incompatible(format!(
                "базой {} пользуется другой процесс (её журнал WAL не удалось перенести в файл): дождитесь его конца и повторите restore",
                db.display()
            )));
        }
        // A file SQLite cannot open (damaged: the reason for restoring) is kept as it is, its
        // journal beside it.
        Err(error) => {
            tracing::warn!(%error, database = %db.display(), "the database to be replaced cannot be checkpointed; it is kept with its journal as it is")
        }
    }
    Ok(())
}

/// Copies the whole WAL of `db` into the file and empties it (`wal_checkpoint(TRUNCATE)`),
/// waiting a little for another process's transaction: `false` when one still holds it.
fn checkpoint_all(db: &Path) -> Result<bool> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(IN_USE_WAIT)?;
    let journal: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    if !journal.eq_ignore_ascii_case("wal") {
        // A rollback journal: a hot one is rolled back by this first read.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| {
            row.get::<_, i64>(0)
        })?;
        return Ok(true);
    }
    let outcome = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
        ))
    });
    match outcome {
        Ok((busy, log, done)) => Ok(busy == 0 && log == done),
        Err(error)
            if matches!(
                error.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            ) =>
        {
            Ok(false)
        }
        Err(error) => Err(error.into()),
    }
}
