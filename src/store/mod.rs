//! The hub's SQLite database: the only module that speaks SQL or imports rusqlite.
//!
//! `Store::open` is the one way in: it creates the data directory (mode 0700), opens the file
//! in WAL mode with `synchronous=FULL`, a busy timeout and foreign keys on, and creates or migrates
//! the schema (see `migrations.rs`). The submodules group the queries by table. The store knows
//! the shape of rows, not the rules: validation lives in `domain`, orchestration in `service`.
//!
//! A `Store` owns one blocking connection; it is `Send` but not `Sync`. Async callers run it on a
//! blocking thread, never on a runtime worker.

mod access;
pub(crate) use access::user_name;
mod agents;
mod backup;
mod commands;
mod conflicts;
mod console;
mod dbfile;
pub(crate) use console::QueueMove;
mod health;
mod held;
mod ids;
use ids::next_id;
mod idempotency;
pub(crate) use idempotency::KeyRow;
mod migrations;
mod mirror;
mod projects;
mod restore;
mod retention;
mod schema;
pub(crate) mod settings;
mod status;
mod tx;

pub(crate) use agents::AgentSeen;
pub(crate) use backup::{BackupKind, FileLock, is_in_backups, lock_database_file};
pub(crate) use commands::{AttemptRow, BatchRow, CommandRow, Finish, GiveBack};
pub use health::{Fault, FaultSeen};
pub(crate) use held::HeldRow;
pub(crate) use mirror::{CommentRow, IssueRow, IssueText, NoteRow};
pub(crate) use restore::{RestoredTokens, lock_data_folder, restore};
pub(crate) use retention::{BatchAge, Removed};
pub(crate) use schema::{CURRENT_SCHEMA_VERSION, CURRENT_V4_REVISION};
pub(crate) use status::{AGENTS_LISTED, AgentRow, RunRow, StatusCounts};
pub(crate) use tx::{Tallies, Tx};

use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use time::OffsetDateTime;

/// How long an ordinary statement waits for another connection's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long opening waits for another process that is migrating the same database (the backup
/// of a large database takes a while).
const MIGRATION_BUSY_TIMEOUT: Duration = Duration::from_secs(600);

/// Errors of the store; callers branch on `Conflict` and `Busy`, the rest are reported as they
/// are.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule the store checks under its write lock (a project label).
    #[error("{field}: {message}")]
    Conflict { field: String, message: String },
    /// The file is not a hub database, or of a schema this binary does not know.
    #[error("{0}")]
    Incompatible(String),
    /// This process may not open the database's files as it must (EACCES): the message names
    /// the file, its owner, the user we are and the line to run it as the owner.
    #[error("{0}")]
    Denied(String),
    /// There is no database at this path, and the command does not create one.
    #[error("базы данных нет: {0} (её создают {program} init, migrate и serve)", program = crate::program())]
    Missing(PathBuf),
    /// The folder the database would be made in is missing: only the data folder itself is
    /// created, never the path to it (a mistyped `--db` must not make a tree).
    #[error(
        "папки {0} нет: база в ней не создаётся (проверьте путь --db; хаб создаёт только саму папку данных, не путь к ней)"
    )]
    NoFolder(PathBuf),
    /// The database is gone from a folder where a hub lived (its lock file, backups, WAL): a new
    /// empty database would hide the loss, so none is made.
    #[error(
        "базы данных {path} нет, но в {dir} работал хаб ({traces}): новая пустая база не создаётся. Восстановите базу (например, {program} --db {path} restore {restore}) или, чтобы начать заново, уберите эти файлы",
        program = crate::program()
    )]
    Lost {
        path: PathBuf,
        dir: PathBuf,
        traces: String,
        restore: String,
    },
    /// A migration step failed; the database is left at its old version.
    #[error(
        "миграция базы со схемы v{from} на v{to} не удалась, база осталась на v{from}: {source}"
    )]
    Migration {
        from: u32,
        to: u32,
        #[source]
        source: Box<StoreError>,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The database file cannot be written now (a full disk, a read-only file, an I/O error) or
    /// is no longer the file the hub opened; nothing was written, the same request may succeed
    /// once the cause is gone.
    #[error("{}: {detail}", unavailable_words(*fault))]
    Unavailable { fault: Fault, detail: String },
    /// Another connection held the lock past the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`):
    /// nothing was written, the same request may succeed later.
    #[error("база данных занята: {0}")]
    Busy(#[source] rusqlite::Error),
    #[error("ошибка базы данных: {0}")]
    Sqlite(#[source] rusqlite::Error),
    #[error("испорченный JSON в базе: {0}")]
    Json(#[from] serde_json::Error),
}

/// SQLite's own code decides whether an error is a busy database or a fault of the file, never
/// its message.
impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        if let Some(fault) = Fault::of(&error) {
            return StoreError::Unavailable {
                fault,
                detail: error.to_string(),
            };
        }
        match error.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                StoreError::Busy(error)
            }
            _ => StoreError::Sqlite(error),
        }
    }
}

fn unavailable_words(fault: Fault) -> &'static str {
    match fault {
        Fault::Full => {
            "на диске базы нет места, запись не сделана; повторите, когда место появится"
        }
        Fault::ReadOnly => {
            "файл базы или его папка доступны только для чтения, запись не сделана; повторите, когда запись будет разрешена"
        }
        Fault::Io => "ошибка ввода-вывода базы, запись не сделана",
        Fault::Moved => {
            "файл базы удалён или заменён, пока хаб работал: запись не сделана; верните файл на место или перезапустите хаб"
        }
        Fault::Overwritten => {
            "файл базы перезаписан на месте, пока хаб работал: запись не сделана и не будет сделана до перезапуска; остановите хаб, восстановите нужную копию командой jira-hub restore и запустите хаб снова"
        }
    }
}

/// The store's error inside a caller's error type, so a transaction can tell a fault of the
/// file (to record it, and to replace a spoiled connection) whatever the caller wraps it in.
pub(crate) trait AsStoreError {
    fn as_store_error(&self) -> Option<&StoreError>;
}

impl AsStoreError for StoreError {
    fn as_store_error(&self) -> Option<&StoreError> {
        Some(self)
    }
}

pub(crate) type Result<T, E = StoreError> = std::result::Result<T, E>;

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    let context = context.into();
    move |source| StoreError::Io { context, source }
}

/// What opening did to the database, for `jira-hub migrate` and the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReport {
    /// The schema version found; 0 for a new, empty database.
    pub old_version: u32,
    pub new_version: u32,
    /// The schema found and the one now, as the operator reads them (`v4r12`, `v4r17`): equal
    /// when nothing was migrated.
    pub old_schema: String,
    pub new_schema: String,
    /// The copy made before migrating, when this process migrated an existing database.
    pub backup: Option<PathBuf>,
    /// Things the operator should know (legacy settings that did not convert, permissions).
    pub warnings: Vec<String>,
}

/// The database of one hub.
pub(crate) struct Store {
    conn: Connection,
    /// The database file; backups go to `backups/` beside it.
    path: PathBuf,
    /// The device and inode of the file this process opened at `path` (its first connection's):
    /// a write is refused when the path names another file, or none.
    identity: (u64, u64),
    /// The faults writes met, shared by every connection of the process ([`Store::reconnect`]).
    health: Arc<health::DbHealth>,
    /// Whether this connection leaves checkpoints to its owner (kept when it is replaced).
    deferred_checkpoints: bool,
    /// What the committed transactions of the process did, shared like `health`.
    tallies: Arc<Tallies>,
    /// Told after each commit of this connection that changed a batch, a command or an attempt
    /// (kept by [`Store::reconnect`]): what `GET /batches/{id}?wait_seconds=N` waits on.
    batch_listener: Option<BatchListener>,
}

/// What is called after a commit that changed a batch or its commands.
pub(crate) type BatchListener = Arc<dyn Fn() + Send + Sync>;

/// The tables whose rows make a batch's view: a commit changing any of them changes a batch.
const BATCH_TABLES: [&str; 3] = ["batch", "command", "command_attempt"];

impl Store {
    /// Rows this connection's statements have inserted, updated or deleted since it opened
    /// (`sqlite3_total_changes`, a counter in memory): unchanged across a request means the
    /// request wrote nothing.
    pub(crate) fn total_changes(&self) -> u64 {
        self.conn.total_changes()
    }

    /// SQLite's `PRAGMA data_version` of this connection: it changes when another connection
    /// (of this process or another, such as the CLI) commits, never for this one's own commits.
    pub(crate) fn data_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .pragma_query_value(None, "data_version", |row| row.get(0))?)
    }

    /// Opens the database at `path`, creating or migrating it. `now` names the migration backup.
    pub(crate) fn open(path: &Path, now: OffsetDateTime) -> Result<(Store, OpenReport)> {
        Store::open_with(path, now, Create::IfMissing)
    }

    /// Opens the database at `path`, migrating it, creating it as `create` allows. Nothing in
    /// its folder changes (no mode, no `backups/`, no new file) until the path is known to be a
    /// hub's database or the place for a new one: a file that is not one is refused first.
    pub(crate) fn open_with(
        path: &Path,
        now: OffsetDateTime,
        create: Create,
    ) -> Result<(Store, OpenReport)> {
        let data_dir = data_dir_of(path);
        let mut warnings = Vec::new();
        let existing = match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => {
                access::check(path, access::Need::Write)?;
                if meta.len() == 0 && create != Create::AlsoInEmptyFile {
                    refuse_empty_file(path)?;
                }
                let conn = Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .map_err(not_a_database(path))?;
                conn.busy_timeout(MIGRATION_BUSY_TIMEOUT)?;
                // Read before anything is changed: not SQLite, not a hub's, a newer schema.
                migrations::Plan::of(&conn).map_err(|error| match error {
                    StoreError::Sqlite(error) => not_a_database(path)(error),
                    other => other,
                })?;
                Some(conn)
            }
            Ok(_) => {
                return Err(StoreError::Incompatible(format!(
                    "{} — не файл базы данных (папка или устройство)",
                    path.display()
                )));
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                match create {
                    Create::Never => return Err(StoreError::Missing(path.to_path_buf())),
                    Create::Guarded => refuse_if_lost(path, &data_dir)?,
                    Create::IfMissing | Create::AlsoInEmptyFile => {}
                }
                if !data_dir.is_dir() {
                    let parent = data_dir_of(&data_dir);
                    if !parent.is_dir() {
                        return Err(StoreError::NoFolder(parent));
                    }
                    std::fs::create_dir(&data_dir).map_err(io_error(format!(
                        "не удалось создать {}",
                        data_dir.display()
                    )))?;
                    tracing::info!(folder = %data_dir.display(), "created the data folder");
                }
                None
            }
            Err(error) => {
                return Err(StoreError::Io {
                    context: format!("не удалось прочитать {}", path.display()),
                    source: error,
                });
            }
        };
        ensure_private_dir(&data_dir, &mut warnings)?;
        ensure_private_dir(&backup::backups_dir(path), &mut warnings)?;

        let conn = match existing {
            Some(conn) => conn,
            None => Connection::open(path).map_err(not_a_database(path))?,
        };
        conn.busy_timeout(MIGRATION_BUSY_TIMEOUT)?;
        // Only a new database takes it (an existing one keeps the size it was made with).
        conn.pragma_update(None, "page_size", NEW_PAGE_SIZE)?;
        let journal: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(not_a_database(path))?;
        if !journal.eq_ignore_ascii_case("wal") {
            warnings.push(format!(
                "the database is in journal mode {journal}, not WAL: is it on a network filesystem?"
            ));
        }
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        tune(&conn)?;
        let identity =
            health::identity_of(path).ok_or_else(|| StoreError::Missing(path.to_path_buf()))?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            identity,
            health: Arc::default(),
            deferred_checkpoints: false,
            tallies: Arc::default(),
            batch_listener: None,
        };
        let outcome = migrations::migrate(&mut store, now)?;
        warnings.extend(outcome.warnings);
        settings::ensure_defaults(&mut store)?;
        store.conn.busy_timeout(BUSY_TIMEOUT)?;
        store.health.remember_companions(path);
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        Ok((
            store,
            OpenReport {
                old_version: outcome.old_version,
                new_version: CURRENT_SCHEMA_VERSION,
                old_schema: outcome.old_schema,
                new_schema: schema::current_schema(),
                backup: outcome.backup,
                warnings,
            },
        ))
    }

    /// Opens an existing database, migrating it if needed; never creates one.
    pub(crate) fn open_existing(path: &Path, now: OffsetDateTime) -> Result<(Store, OpenReport)> {
        Store::open_with(path, now, Create::Never)
    }

    /// Opens an existing database for reading only: nothing is created, migrated or written, so it
    /// works on a read-only data directory and on a backup file. A database that needs a
    /// migration is refused with what to do.
    pub(crate) fn open_read_only(path: &Path) -> Result<Store> {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() && meta.len() == 0 => refuse_empty_file(path)?,
            Ok(meta) if meta.is_file() => {}
            _ => return Err(StoreError::Missing(path.to_path_buf())),
        }
        access::check(path, access::Need::Read)?;
        let conn = match Self::read_only_connection(path, false) {
            Ok(conn) => conn,
            // A WAL database in a folder this process cannot write (its `-shm` cannot be made):
            // nobody writes there, so it is read as an immutable file.
            Err(_) => Self::read_only_connection(path, true)?,
        };
        let version = migrations::read_version(&conn)?;
        let revision = migrations::read_revision(&conn)?;
        match migrations::Plan::of(&conn) {
            Ok(migrations::Plan::Current) => {}
            Err(StoreError::Incompatible(_)) => {
                return Err(StoreError::Incompatible(format!(
                    "база {} схемы v{version} (ревизия {revision}) новее, чем знает этот jira-hub: запустите более новый",
                    path.display()
                )));
            }
            Err(error) => return Err(error),
            Ok(migrations::Plan::Migrate { .. }) => {
                return Err(StoreError::Incompatible(format!(
                    "база {} схемы {} требует миграции до {}: выполните {} --db {} migrate",
                    path.display(),
                    schema::schema_label(version, revision),
                    schema::current_schema(),
                    crate::program(),
                    path.display()
                )));
            }
        }
        conn.busy_timeout(BUSY_TIMEOUT)?;
        tune(&conn)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            identity: health::identity_of(path).unwrap_or_default(),
            health: Arc::default(),
            deferred_checkpoints: false,
            tallies: Arc::default(),
            batch_listener: None,
        })
    }

    fn read_only_connection(path: &Path, immutable: bool) -> Result<Connection> {
        let mut uri = String::from("file:");
        for c in path.display().to_string().chars() {
            match c {
                '%' => uri.push_str("%25"),
                '?' => uri.push_str("%3F"),
                '#' => uri.push_str("%23"),
                c => uri.push(c),
            }
        }
        uri.push_str(if immutable {
            "?immutable=1"
        } else {
            "?mode=ro"
        });
        let conn = Connection::open_with_flags(
            &uri,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(not_a_database(path))?;
        // Opening is lazy: the first read shows whether the file can be read at all.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| {
            row.get::<_, i64>(0)
        })
        .map_err(not_a_database(path))?;
        Ok(conn)
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes the database takes on its disk now: its file and its WAL (what a full disk
    /// is made of; `stat`s only).
    pub(crate) fn file_bytes(&self) -> u64 {
        [self.path.clone(), health::companion(&self.path, "-wal")]
            .iter()
            .filter_map(|path| std::fs::metadata(path).ok())
            .map(|metadata| metadata.len())
            .sum()
    }

    /// When the newest copy in `backups/` was made, if there is one.
    pub(crate) fn newest_backup_at(&self) -> Option<OffsetDateTime> {
        backup::newest_backup_at(&self.path)
    }

    /// What the committed transactions of this process did (shared by its connections).
    pub(crate) fn tallies(&self) -> Arc<Tallies> {
        self.tallies.clone()
    }

    /// The folder of migration and periodic backups.
    pub(crate) fn backups_dir(&self) -> PathBuf {
        backup::backups_dir(&self.path)
    }

    /// Runs `f` in a write transaction taken at once (`BEGIN IMMEDIATE`), so that what it reads
    /// cannot change before it writes; commits when `f` succeeds, rolls back otherwise.
    fn write<T>(&mut self, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let touched = self.writable_connection();
        let (path, identity, health) = (self.path.clone(), self.identity, self.health.clone());
        let changes = self.conn.total_changes();
        let result = (|| {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = f(&tx)?;
            remark(&tx, &health, changes)?;
            check_file(&path, identity, &health)?;
            tx.commit()?;
            health.observe(&path);
            Ok(value)
        })();
        self.tell_batch_change(&result, touched);
        self.after_write(result, changes)
    }

    /// What a write's outcome says of the file: a fault is recorded (and a connection that
    /// stays read-only or broken is replaced), a success that wrote rows clears the last one.
    /// A transaction that changed nothing (`changes`, SQLite's count of rows changed by the
    /// connection before it, is the same after it) wrote no page, so it says nothing of the
    /// file: a full disk or a read-only file commits it (a timer's sweep that found nothing
    /// made `/ready` say ready seconds into a full disk).
    pub(super) fn after_write<T, E: AsStoreError>(
        &mut self,
        result: std::result::Result<T, E>,
        changes: u64,
    ) -> std::result::Result<T, E> {
        match &result {
            Ok(_) if self.conn.total_changes() != changes => self.proved_writable(),
            Ok(_) => {}
            Err(error) => {
                if let Some(StoreError::Unavailable { fault, detail }) = error.as_store_error() {
                    let (fault, detail) = (*fault, detail.clone());
                    self.note_fault(fault, detail);
                    if fault.spoils_connection() {
                        self.replace_connection();
                    }
                }
            }
        }
        result
    }

    /// Records a fault for the process; the first time the file is found deleted or replaced,
    /// what this connection still reads of it is copied into `backups/` (`<stamp>-rescued`),
    /// so nothing the hub acknowledged before is lost with the file, and the old `-wal` and
    /// `-shm` are moved beside that copy, so that they never meet the file now at the path (a
    /// backup put back, say): from then on no connection of the process checkpoints, not even
    /// when it closes, and a restart opens the new file as it was put.
    fn note_fault(&self, fault: Fault, detail: String) {
        let new = self.health.record(fault, detail);
        if new && fault == Fault::Overwritten {
            // What the connections read now is the new file under the old WAL's pages: no copy
            // of it means anything. The old WAL must never be copied into the new file (by a
            // checkpoint, or replayed at the next start): it goes aside.
            self.health.move_companions_aside(&self.path, || {
                let now = OffsetDateTime::now_utc();
                tracing::error!(
                    database = %self.path.display(),
                    "the database file was written over in place under the hub (a cp of a copy over it?): no write is taken until a restart"
                );
                backup::backups_dir(&self.path).join(format!(
                    "{}-overwritten",
                    crate::domain::time::backup_stamp(now)
                ))
            });
            return;
        }
        if new && fault == Fault::Moved {
            self.health.move_companions_aside(&self.path, || {
                let now = OffsetDateTime::now_utc();
                match self.rescue_copy(now) {
                    Ok(copy) => {
                        tracing::error!(
                            copy = %copy.display(),
                            "the database file was deleted or replaced under the hub; what it held is copied"
                        );
                        copy
                    }
                    Err(error) => {
                        tracing::error!(
                            %error,
                            "the database file was deleted or replaced under the hub, and could not be copied"
                        );
                        backup::backups_dir(&self.path)
                            .join(format!("{}-rescued.sqlite", crate::domain::time::backup_stamp(now)))
                    }
                }
            });
        }
    }

    /// A connection SQLite opened read-only (the file could not be written then) stays so for
    /// good: before a write it is replaced, so writes work again once the file is writable.
    pub(super) fn writable_connection(&mut self) -> Option<Arc<AtomicBool>> {
        if self.conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
            self.replace_connection();
        }
        // SQLite's update hook (sqlite3_update_hook) is called for each row a statement
        // inserts, updates or deletes in a rowid table, with the table's name: the write says
        // here whether it touched a batch, whichever query did it. Set on the connection in use
        // now (a replaced connection has none).
        self.batch_listener.as_ref()?;
        let touched = Arc::new(AtomicBool::new(false));
        let flag = touched.clone();
        self.conn.update_hook(Some(
            move |_: rusqlite::hooks::Action, _: &str, table: &str, _: i64| {
                if BATCH_TABLES.contains(&table) {
                    flag.store(true, Ordering::Relaxed);
                }
            },
        ));
        Some(touched)
    }

    /// `listener` is called after each commit (of this connection and those it makes) that
    /// changed a batch, a command or an attempt.
    pub(crate) fn set_batch_listener(&mut self, listener: BatchListener) {
        self.batch_listener = Some(listener);
    }

    /// Tells the listener when a write that succeeded touched a batch.
    fn tell_batch_change<T, E>(
        &self,
        result: &std::result::Result<T, E>,
        touched: Option<Arc<AtomicBool>>,
    ) {
        if result.is_ok()
            && touched.is_some_and(|t| t.load(Ordering::Relaxed))
            && let Some(listener) = &self.batch_listener
        {
            listener();
        }
    }

    /// Opens a new connection in place of this one (the old one is closed: SQLite keeps the
    /// process's locks on the file while another connection holds them). When the file cannot
    /// be opened now, the old one stays, to be replaced at the next fault.
    fn replace_connection(&mut self) {
        // Never a connection to another file than the one opened (its old journal moved aside).
        if check_file(&self.path, self.identity, &self.health).is_err() {
            return;
        }
        let opened = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(StoreError::from)
        .and_then(|conn| {
            conn.busy_timeout(BUSY_TIMEOUT)?;
            conn.pragma_update(None, "synchronous", "FULL")?;
            conn.pragma_update(None, "foreign_keys", "ON")?;
            tune(&conn)?;
            if self.deferred_checkpoints {
                conn.query_row("PRAGMA wal_autocheckpoint = 0", [], |_| Ok(()))
                    .optional()?;
            }
            Ok(conn)
        });
        match opened {
            Ok(conn) => {
                tracing::debug!("a database connection that met a fault was replaced");
                self.conn = conn;
            }
            Err(error) => tracing::warn!(%error, "cannot open a new database connection"),
        }
    }

    /// Another connection to the same file, sharing what writes met; refused (never created)
    /// when the path no longer names the file this store opened.
    pub(crate) fn reconnect(&self, now: OffsetDateTime) -> Result<Store> {
        health::check_identity(&self.path, self.identity)
            .and_then(|()| self.health.check_content(&self.path))
            .inspect_err(|error| {
                if let StoreError::Unavailable { fault, detail } = error {
                    self.note_fault(*fault, detail.clone());
                }
            })?;
        let (mut store, _) = Store::open_with(&self.path, now, Create::Never)?;
        health::check_identity(&self.path, self.identity)?;
        store.identity = self.identity;
        store.health = self.health.clone();
        store.tallies = self.tallies.clone();
        store.batch_listener = self.batch_listener.clone();
        Ok(store)
    }

    /// The fault the last write met, if no write succeeded since; the file at the path not
    /// being the one opened is checked now (a `stat`), whatever the writes met.
    pub(crate) fn health(&self) -> Option<FaultSeen> {
        if let Err(StoreError::Unavailable { fault, detail }) =
            health::check_identity(&self.path, self.identity)
                .and_then(|()| self.health.check_content(&self.path))
        {
            self.note_fault(fault, detail);
        } else if self.health.put_companions_back()
            && self
                .health
                .current()
                .is_some_and(|seen| seen.fault == Fault::Moved)
        {
            // The file is back where it was, and its journal beside it.
            self.health.clear();
        }
        self.health.current()
    }

    /// A write that changes nothing (the header's revision number set to itself, which SQLite
    /// writes as a page like any other): while a fault is recorded, shows whether writing works
    /// again without waiting for a request; at rest (no fault) it writes nothing. After a full
    /// disk it writes only once the disk has room for a few commits again ([`PROBE_ROOM`]): the
    /// WAL starts over in the space it already has, so a page written there says nothing of
    /// the disk while the next real write still fails.
    pub(crate) fn probe_write(&mut self) -> Result<()> {
        let Some(seen) = self.health.current() else {
            return Ok(());
        };
        if seen.fault == Fault::Full {
            let room = rustix::fs::statvfs(data_dir_of(&self.path))
                .map(|stat| stat.f_bavail.saturating_mul(stat.f_frsize))
                .unwrap_or(u64::MAX);
            if room < PROBE_ROOM {
                return Err(StoreError::Unavailable {
                    fault: Fault::Full,
                    detail: format!(
                        "на диске {} свободно {room} байт",
                        data_dir_of(&self.path).display()
                    ),
                });
            }
        }
        if seen.fault == Fault::ReadOnly && !access::writable(&self.path) {
            // A connection may still write through a descriptor opened before (SQLite reuses
            // one of a closed connection of the same process), which proves nothing.
            return Err(StoreError::Unavailable {
                fault: Fault::ReadOnly,
                detail: format!(
                    "{} по-прежнему нельзя открыть на запись",
                    self.path.display()
                ),
            });
        }
        self.write(|tx| {
            let revision: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
            tx.pragma_update(None, "user_version", revision)?;
            Ok(())
        })?;
        // It changed no row, yet wrote its page: a write succeeded.
        self.proved_writable();
        Ok(())
    }

    /// A write of this connection succeeded: the fault recorded ends if that shows the next
    /// write of any connection will succeed too. After a read-only fault, the file, its journals
    /// and its folder must be writable to a new open (access(2)): a descriptor opened before the
    /// file became read-only stays writable, and SQLite hands a closed connection's descriptor to
    /// the next connection it opens, so some writes succeed while new connections are refused.
    /// After a full disk, the disk must have [`PROBE_ROOM`] free (the WAL starts over in space it
    /// already has). Before, any write ended the fault, and `/ready` said 200 while most writes
    /// failed.
    fn proved_writable(&self) {
        let Some(seen) = self.health.current() else {
            return;
        };
        let shown = match seen.fault {
            Fault::ReadOnly => access::writable(&self.path),
            Fault::Full => rustix::fs::statvfs(data_dir_of(&self.path))
                .map(|stat| stat.f_bavail.saturating_mul(stat.f_frsize))
                .map_or(true, |room| room >= PROBE_ROOM),
            Fault::Io | Fault::Moved | Fault::Overwritten => true,
        };
        if shown {
            self.health.clear();
        }
    }

    /// Commits on this connection stop running SQLite's automatic checkpoint (which copies the
    /// WAL into the database file inside the commit that crosses 1,000 pages): whoever calls this
    /// checkpoints with [`Store::checkpoint`], off the commit's path.
    pub(crate) fn defer_checkpoints(&mut self) -> Result<()> {
        self.deferred_checkpoints = true;
        self.conn
            .query_row("PRAGMA wal_autocheckpoint = 0", [], |_| Ok(()))
            .optional()?;
        Ok(())
    }

    /// The database's page size in bytes.
    pub(crate) fn page_size(&self) -> Result<u64> {
        Ok(self
            .conn
            .query_row("PRAGMA page_size", [], |row| row.get(0))?)
    }

    /// A passive checkpoint: copies into the database file what the WAL holds and no reader
    /// still needs, without waiting for the writer or any reader; the next write transaction
    /// then starts the WAL over. Durability does not depend on it: a commit is durable once its
    /// WAL frames are synced.
    pub(crate) fn checkpoint(&self) -> Result<()> {
        if !self.may_checkpoint() {
            return Ok(());
        }
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .optional()?;
        self.health.observe(&self.path);
        Ok(())
    }

    /// Truncates the WAL to nothing when every frame of it is in the database file and no
    /// reader needs it (`wal_checkpoint(TRUNCATE)`), waiting for nobody: a connection that
    /// holds the WAL makes it answer `false` at once, to be tried again later. The hub calls it
    /// when nothing was committed for a while, so the file beside the database is empty at rest.
    pub(crate) fn checkpoint_truncate(&self) -> Result<bool> {
        if !self.may_checkpoint() {
            return Ok(false);
        }
        self.conn.busy_timeout(Duration::ZERO)?;
        let outcome = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                row.get::<_, i64>(0)
            });
        self.conn.busy_timeout(BUSY_TIMEOUT)?;
        self.health.observe(&self.path);
        match outcome {
            Ok(busy) => Ok(busy == 0),
            Err(rusqlite::Error::SqliteFailure(error, _))
                if matches!(
                    error.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                Ok(false)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Whether the WAL may be copied into the file at the path: never once that file was found
    /// deleted, replaced or written over (the WAL belongs to the file the hub opened, and
    /// copied into another one it would spoil it), looked at now.
    fn may_checkpoint(&self) -> bool {
        self.health()
            .is_none_or(|seen| !matches!(seen.fault, Fault::Moved | Fault::Overwritten))
            && !self.health.set_aside()
    }

    /// Marks the file as this process's (see [`health::ContentMark`]): a random number in the
    /// header, copied into the file by a checkpoint; from then on every commit and the timers'
    /// looks check that the file still carries it, so a copy written over the file in place
    /// is found before a write is acknowledged into the WAL above it. The daemon calls it once,
    /// after taking its locks and before opening its other connections.
    pub(crate) fn claim_content(&mut self) -> Result<()> {
        let previous = health::read_mark(&self.path)?;
        let current = health::fresh_mark(previous.as_slice())?;
        let value = i32::from_be_bytes(current);
        self.write(|tx| {
            tx.pragma_update(None, "application_id", value)?;
            Ok(())
        })?;
        // Into the file now, when nobody else reads: until then the file's old mark is accepted.
        let _ = self.checkpoint_truncate();
        self.health
            .set_mark(health::ContentMark::new(previous, current));
        self.health.check_content(&self.path)
    }

    /// The size of the WAL file beside the database (0 when there is none).
    pub(crate) fn wal_bytes(&self) -> u64 {
        let mut wal = self.path.as_os_str().to_owned();
        wal.push("-wal");
        std::fs::metadata(std::path::PathBuf::from(wal)).map_or(0, |m| m.len())
    }

    /// Writes what the hub kept in memory of the agents `due` (their last-seen times, see
    /// `service::Presence`) in one transaction.
    pub(crate) fn write_agents_seen(&mut self, due: &[AgentSeen<'_>]) -> Result<()> {
        self.transact(|tx| {
            for seen in due {
                tx.touch_agent(seen)?;
            }
            Ok::<_, StoreError>(())
        })
    }

    /// A second, read-only connection to the same file (backups read through it), reading
    /// through a memory map only in a process that does not serve the file (the daemon's daily
    /// backup reads with pread, as its other connections do: see [`MMAP_BYTES`]).
    fn reader(&self) -> Result<Connection> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        if !self.health.serves() {
            backup::map_for_copy(&conn)?;
        }
        Ok(conn)
    }
}

/// Gives the header a new mark inside the transaction about to commit (in the daemon, see
/// [`health::ContentMark`]): a checkpoint that copies this commit into the file brings a mark
/// no copy made before it carries. A transaction that changed no row (`changes`, the
/// connection's count before it, is the same) writes no page and gets none.
fn remark(conn: &Connection, health: &health::DbHealth, changes: u64) -> Result<()> {
    if conn.total_changes() == changes {
        return Ok(());
    }
    if let Some(mark) = health.next_mark()? {
        conn.pragma_update(None, "application_id", i32::from_be_bytes(mark))?;
    }
    Ok(())
}

/// Whether the file at `path` is still the one opened, with its journal beside it: a `Moved`
/// error otherwise (its `-wal` and `-shm` moved aside and not yet put back).
fn check_file(path: &Path, opened: (u64, u64), health: &health::DbHealth) -> Result<()> {
    health::check_identity(path, opened)?;
    health.check_content(path)?;
    if !health.put_companions_back() {
        return Err(StoreError::Unavailable {
            fault: Fault::Moved,
            detail: format!(
                "{} вернулся, но его журнал WAL не удалось вернуть рядом: перезапустите хаб",
                path.display()
            ),
        });
    }
    Ok(())
}

impl Drop for Store {
    /// A connection of a database found deleted or replaced closes without its checkpoint
    /// (SQLite's last connection copies the WAL into the database file and deletes the `-wal` by
    /// its name): nothing of the old file goes near the path. A hub stopped before anything
    /// looked at the file finds out here, with one `stat`.
    fn drop(&mut self) {
        if !self.health.knows_companions() {
            return;
        }
        if !self.health.set_aside()
            && let Err(StoreError::Unavailable { fault, detail }) =
                health::check_identity(&self.path, self.identity)
                    .and_then(|()| self.health.check_content(&self.path))
        {
            self.note_fault(fault, detail);
        }
        if self.health.set_aside() {
            let _ = self.conn.set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            );
        }
    }
}

/// The free space the probe after a full disk waits for before it writes: a few commits of
/// 32 KiB pages with their WAL frames.
const PROBE_ROOM: u64 = 1024 * 1024;

/// The page size of a database this binary creates. An issue row is about 4 KiB (its raw
/// `fields` and description): at SQLite's default of 4 KiB most rows spilled onto overflow pages
/// and a refresh page of 1,000 issues was over 2,000 WAL frames, each its own writes, copied
/// again by the checkpoint. `cargo bench --bench ingest` measured 16 KiB pages 1.2× faster than
/// 4 KiB and 32 KiB another 1.1× (64 KiB about the same again, but the console's overview, which
/// reads small rows through indexes, got slower); the other benches stayed within their targets.
const NEW_PAGE_SIZE: i64 = 32 * 1024;

/// What a WAL that starts over is cut back to, in bytes.
const JOURNAL_SIZE_LIMIT: i64 = 4 * 1024 * 1024;

/// Page cache per connection, in KiB (SQLite's default is 2 MiB).
const CACHE_KIB: i64 = 16 * 1024;
/// How much of the file a connection maps instead of reading it page by page: nothing. A mapped
/// file cut short under the process (`cp x hub.sqlite` truncates the file before writing it;
/// a shorter copy leaves it short) kills it with SIGBUS on the next read of a page past the new
/// end (sqlite.org/mmap.html: "If the database file is truncated by another process while the
/// memory map is active, a SIGBUS signal might be raised"); the hub then dies with its WAL
/// beside the copy, and the next start replays that WAL into it. Read through `pread` instead,
/// the hub finds the copy by its mark and refuses writes (see `health::ContentMark`).
pub(super) const MMAP_BYTES: i64 = 0;

/// Memory settings of every connection that serves requests: a larger page cache, the file
/// read without a memory map ([`MMAP_BYTES`]), temporary b-trees in memory.
fn tune(conn: &Connection) -> Result<()> {
    conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // A WAL that a checkpoint lets start over is cut back to this size: without a limit it
    // keeps the largest size it ever reached (222 MB beside a 32 KB database).
    conn.query_row(
        &format!("PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}"),
        [],
        |_| Ok(()),
    )
    .optional()?;
    // PRAGMA mmap_size answers with the size it set (capped by the build): read as a row.
    conn.query_row(&format!("PRAGMA mmap_size = {MMAP_BYTES}"), [], |_| Ok(()))
        .optional()?;
    Ok(())
}

/// A file that is not an SQLite database (or is encrypted, or damaged in its header) is a
/// database this binary cannot run, not a passing error.
fn not_a_database(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError {
    let path = path.to_path_buf();
    move |error| match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => StoreError::Incompatible(format!(
            "{} не база данных SQLite (или повреждена)",
            path.display()
        )),
        _ => StoreError::from(error),
    }
}

/// An empty file is refused as the database: SQLite reads it as an empty database, so the hub
/// would make its own in someone else's file (and set its folder to 0700). The hub's own file is
/// never empty (its header is written when it is made) unless all of it is still in a WAL
/// beside it, which is then opened as it is.
fn refuse_empty_file(path: &Path) -> Result<()> {
    let wal = health::companion(path, "-wal");
    if std::fs::metadata(wal).is_ok_and(|wal| wal.len() > 0) {
        return Ok(());
    }
    Err(StoreError::Incompatible(format!(
        "{path} — пустой файл, а не база хаба: база в нём не создаётся (пустые файлы бывают чужими, например в /etc). Проверьте путь --db; чтобы создать базу именно в нём, выполните {program} --db {path} init --config FILE --use-empty-file",
        path = path.display(),
        program = crate::program(),
    )))
}

/// Whether opening may create the database file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Create {
    /// Never: commands that change an existing hub, and the daemon's further connections.
    Never,
    /// When there is none (`init`, and hubs made by tests).
    IfMissing,
    /// When there is none, or in the existing empty file (`init --use-empty-file`): an empty
    /// file is otherwise refused, as it may be anyone's (`/etc` holds such files).
    AlsoInEmptyFile,
    /// Only where no hub lived (`serve`, `migrate`): see [`refuse_if_lost`].
    Guarded,
}

/// The lock file of the data folder (one `serve` per folder).
pub(crate) const LOCK_FILE: &str = "jira-hub.lock";

/// A missing database in a folder that shows a hub lived there (the daemon's lock file, the
/// database's `-wal` or `-shm`, copies in `backups/`) is a lost database, not a first start:
/// refused, naming what was found and the newest copy to restore.
fn refuse_if_lost(path: &Path, data_dir: &Path) -> Result<()> {
    let mut traces = Vec::new();
    for suffix in ["-wal", "-shm"] {
        let companion = PathBuf::from(format!("{}{suffix}", path.display()));
        if companion.exists() {
            traces.push(companion.display().to_string());
        }
    }
    let lock = data_dir.join(LOCK_FILE);
    if lock.exists() {
        traces.push(lock.display().to_string());
    }
    let backups = backup::backups_dir(path);
    let newest = std::fs::read_dir(&backups)
        .map(|entries| {
            entries
                .filter_map(std::result::Result::ok)
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.ends_with(".sqlite") && !name.starts_with('.')
                })
                .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
                .max()
        })
        .ok()
        .flatten();
    if newest.is_some() {
        traces.push(format!("копии в {}", backups.display()));
    }
    if traces.is_empty() {
        return Ok(());
    }
    Err(StoreError::Lost {
        path: path.to_path_buf(),
        dir: data_dir.to_path_buf(),
        traces: traces.join(", "),
        restore: newest.map_or_else(
            || "<копия>".to_string(),
            |(_, newest)| newest.display().to_string(),
        ),
    })
}

/// The data directory: the folder that holds the database file.
pub(crate) fn data_dir_of(db_path: &Path) -> PathBuf {
    match db_path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates `dir` when missing and sets it to 0700 (the database holds tokens). A failed chmod is a
/// warning, not an error. A shared sticky folder such as `/tmp` is never narrowed: that would
/// break every other user of it; the hub warns instead.
fn ensure_private_dir(dir: &Path, warnings: &mut Vec<String>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)
        .map_err(io_error(format!("не удалось создать {}", dir.display())))?;
    let metadata = std::fs::metadata(dir)
        .map_err(io_error(format!("не удалось прочитать {}", dir.display())))?;
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o1000 != 0 && mode & 0o002 != 0 {
        warnings.push(format!(
            "{} is a shared folder (mode {mode:o}); its mode is left alone: give the database a folder of its own",
            dir.display()
        ));
        return Ok(());
    }
    if mode & 0o777 != 0o700
        && let Err(error) = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
    {
        warnings.push(format!(
            "cannot set mode 0700 on {} (it is {mode:o}): {error}",
            dir.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write lock held by another connection past the busy timeout is `Busy`, by SQLite's
    /// code.
    #[test]
    fn a_locked_database_is_busy() {
        let dir = std::env::temp_dir().join(format!("jira-hub-busy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = dir.join("hub.sqlite");
        let now = OffsetDateTime::UNIX_EPOCH;
        let (mut first, _) = Store::open(&db, now).expect("open");
        let (mut second, _) = Store::open(&db, now).expect("open again");
        second
            .conn
            .busy_timeout(Duration::from_millis(1))
            .expect("timeout");
        let holding = first
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .expect("lock");
        let error = second.write(|_| Ok(())).expect_err("locked");
        assert!(matches!(error, StoreError::Busy(_)), "{error:?}");
        drop(holding);
        second.write(|_| Ok(())).expect("free again");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The daemon's backups (the daily one) read the file without a memory map, as its other
    /// connections do: a `cp` over the live file during the copy would otherwise kill the
    /// daemon with SIGBUS. Before, the backup's reader mapped up to SQLite's maximum whatever
    /// the process. A process that does not serve the file (the CLI's `backup`) still maps it.
    #[test]
    fn the_daemons_backup_reader_does_not_map_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("hub.sqlite");
        let now = OffsetDateTime::UNIX_EPOCH;
        let (cli, _) = Store::open(&db, now).expect("open");
        let mapped = |store: &Store| -> i64 {
            store
                .reader()
                .expect("reader")
                .query_row("PRAGMA mmap_size", [], |row| row.get(0))
                .expect("mmap_size")
        };
        assert!(mapped(&cli) > 0, "the CLI's copy reads through a map");
        drop(cli);
        let (mut daemon, _) = Store::open(&db, now).expect("open");
        daemon.claim_content().expect("claim");
        assert_eq!(
            mapped(&daemon),
            0,
            "the daemon's backup maps the file it serves"
        );
        daemon
            .backup_now(BackupKind::Periodic, now)
            .expect("a backup without a map");
    }
}
