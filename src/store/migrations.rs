//! The schema and its history: an append-only list of steps, v0 (empty file) → v1 → v2 → v3 → v4.
//!
//! Never edit a step that has shipped; add one. A new database runs every step, so it has exactly
//! the shape of a migrated one. An existing database is migrated in one transaction taken under
//! the write lock (`BEGIN IMMEDIATE`); the version is read again inside it, so of several
//! processes opening the same old database at once exactly one migrates and backs it up, and the
//! others find it done. The backup is made inside that transaction and is durable before it
//! commits: it holds every committed row (including those still in the WAL of a running old hub,
//! which a checkpoint moves into the file first), either as a copy of the checkpointed file made
//! while the steps run, or through SQLite's online backup API (see `backup::MigrationCopy`).

use super::{Result, Store, StoreError, backup};
use crate::domain::config::legacy_projects;
use crate::domain::jql::base_jql;
use crate::domain::settings::{LEGACY_BASE_JQL, LEGACY_BOARD_ID, PROJECT_KEY, SCHEMA_VERSION};
use crate::domain::time::format_utc;
use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};
use serde_json::Value;
use std::path::PathBuf;
use time::{Duration, OffsetDateTime};

use super::schema::{CURRENT_SCHEMA_VERSION, CURRENT_V4_REVISION, current_schema, schema_label};

/// What one step needs besides the transaction.
struct StepContext {
    now: OffsetDateTime,
}

/// One step: from version `to - 1` to `to`. Returns warnings for the operator.
struct Step {
    to: u32,
    apply: fn(&Transaction<'_>, &StepContext) -> Result<Vec<String>>,
}

const STEPS: [Step; 4] = [
    Step {
        to: 1,
        apply: create_v1,
    },
    Step {
        to: 2,
        apply: v1_to_v2,
    },
    Step {
        to: 3,
        apply: v2_to_v3,
    },
    Step {
        to: 4,
        apply: v3_to_v4,
    },
];

/// One revision of v4: from revision `to - 1` to `to`.
struct Revision {
    to: u32,
    apply: fn(&Transaction<'_>, &StepContext) -> Result<Vec<String>>,
}

const REVISIONS: [Revision; 19] = [
    Revision {
        to: 1,
        apply: v4_revision_1,
    },
    Revision {
        to: 2,
        apply: v4_revision_2,
    },
    Revision {
        to: 3,
        apply: v4_revision_3,
    },
    Revision {
        to: 4,
        apply: v4_revision_4,
    },
    Revision {
        to: 5,
        apply: v4_revision_5,
    },
    Revision {
        to: 6,
        apply: v4_revision_6,
    },
    Revision {
        to: 7,
        apply: v4_revision_7,
    },
    Revision {
        to: 8,
        apply: v4_revision_8,
    },
    Revision {
        to: 9,
        apply: v4_revision_9,
    },
    Revision {
        to: 10,
        apply: v4_revision_10,
    },
    Revision {
        to: 11,
        apply: v4_revision_11,
    },
    Revision {
        to: 12,
        apply: v4_revision_12,
    },
    Revision {
        to: 13,
        apply: v4_revision_13,
    },
    Revision {
        to: 14,
        apply: v4_revision_14,
    },
    Revision {
        to: 15,
        apply: v4_revision_15,
    },
    Revision {
        to: 16,
        apply: v4_revision_16,
    },
    Revision {
        to: 17,
        apply: v4_revision_17,
    },
    Revision {
        to: 18,
        apply: v4_revision_18,
    },
    Revision {
        to: 19,
        apply: v4_revision_19,
    },
];

pub(super) struct MigrationOutcome {
    pub old_version: u32,
    /// The schema found, as [`schema_label`] names it (`v4r12`).
    pub old_schema: String,
    pub backup: Option<PathBuf>,
    pub warnings: Vec<String>,
}

/// What opening a database must do, decided by its `schema_version`, its header's revision
/// number and what it contains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Plan {
    /// The shape this binary runs: nothing to do.
    Current,
    /// Steps from `version` (0: an empty file), then the v4 revisions after `revision`.
    Migrate {
        version: u32,
        revision: u32,
        /// The hub's objects a v4 database lacks although its header counts them (made by
        /// another implementation of the data model, or a header holding another number): every
        /// revision is applied again where its objects are missing.
        missing: Vec<String>,
    },
}

impl Plan {
    /// Decides what `conn`'s database needs. The revision number in the header is trusted only
    /// for a v4 database that holds every table, column and index the hub's v4 has (a new
    /// database's shape); below v4 it means nothing (revisions start after the v4 step).
    pub(super) fn of(conn: &rusqlite::Connection) -> Result<Plan> {
        let version = read_version(conn)?;
        check_known(version)?;
        if version < CURRENT_SCHEMA_VERSION {
            return Ok(Plan::Migrate {
                version,
                revision: 0,
                missing: Vec::new(),
            });
        }
        let header = read_revision(conn)?;
        // What the header's own revision has: an older revision lacks only what came after it.
        let missing = missing_objects(conn, header.min(CURRENT_V4_REVISION))?;
        if !missing.is_empty() {
            return Ok(Plan::Migrate {
                version,
                revision: 0,
                missing,
            });
        }
        check_known_revision(header)?;
        if header == CURRENT_V4_REVISION {
            Ok(Plan::Current)
        } else {
            Ok(Plan::Migrate {
                version,
                revision: header,
                missing,
            })
        }
    }
}

/// Brings the database to [`CURRENT_SCHEMA_VERSION`].
pub(super) fn migrate(store: &mut Store, now: OffsetDateTime) -> Result<MigrationOutcome> {
    let seen = read_version(&store.conn)?;
    if Plan::of(&store.conn)? == Plan::Current {
        return Ok(MigrationOutcome {
            old_version: seen,
            old_schema: current_schema(),
            backup: None,
            warnings: Vec::new(),
        });
    }
    let path = store.path.clone();
    let reader = store.reader();
    let tx = store
        .conn
        .transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Another process may have migrated between the first look and the lock.
    let (version, revision, missing) = match Plan::of(&tx)? {
        Plan::Current => {
            tx.commit()?;
            return Ok(MigrationOutcome {
                old_version: read_version(&store.conn)?,
                old_schema: current_schema(),
                backup: None,
                warnings: Vec::new(),
            });
        }
        Plan::Migrate {
            version,
            revision,
            missing,
        } => (version, revision, missing),
    };
    let old_schema = schema_label(version, read_revision(&tx)?);
    let copy = if version > 0 {
        Some(
            backup::MigrationCopy::plan(reader?, &path, (version, read_revision(&tx)?), now)
                .map_err(backup_failed(version))?,
        )
    } else {
        None
    };
    // The steps read with pread, not through a memory map: mapping the file that is being copied
    // beside them made the copy twice as slow (`cargo bench --bench migrate_v1`). Set back when
    // the migration ends.
    tx.query_row(
        &format!("PRAGMA mmap_size = {MIGRATION_MMAP_BYTES}"),
        [],
        |_| Ok(()),
    )
    .optional()?;
    let (backup, applied) = std::thread::scope(|scope| {
        // A file copy runs beside the steps (they write to the WAL only, and commit after it);
        // a copy through the backup API is made first, as before any other write.
        let (running, mut made) = match copy {
            Some(copy) if copy.concurrent() => (Some(scope.spawn(move || copy.write())), None),
            Some(copy) => (None, Some(copy.write())),
            None => (None, None),
        };
        let applied = match &made {
            Some(Err(_)) => Ok(Vec::new()),
            _ => apply_all(&tx, version, revision, &missing, now),
        };
        if let Some(running) = running {
            made = Some(running.join().unwrap_or_else(|_| {
                Err(StoreError::Io {
                    context: "копирование базы остановилось".into(),
                    source: std::io::Error::other("panic"),
                })
            }));
        }
        (made.transpose(), applied)
    });
    tx.query_row(
        &format!("PRAGMA mmap_size = {}", super::MMAP_BYTES),
        [],
        |_| Ok(()),
    )
    .optional()?;
    let backup = match backup {
        Ok(backup) => backup,
        Err(error) => {
            // Nothing is committed: the transaction rolls back when dropped.
            return Err(backup_failed(version)(error));
        }
    };
    // The backup is durable before the migration commits.
    let applied = applied.and_then(|warnings| {
        tx.commit()?;
        Ok(warnings)
    });
    match applied {
        Ok(warnings) => {
            if let Some(backup) = &backup {
                tracing::info!(
                    from = %old_schema,
                    to = %current_schema(),
                    backup = %backup.display(),
                    "database migrated"
                );
            }
            Ok(MigrationOutcome {
                old_version: version,
                old_schema,
                backup,
                warnings,
            })
        }
        Err(error) => {
            // The transaction rolled back: the database is at its old version, and this backup
            // belongs to a migration that did not happen.
            if let Some(backup) = &backup {
                let _ = std::fs::remove_file(backup);
            }
            Err(error)
        }
    }
}

/// The steps after `version`, then the v4 revisions after `revision`; a v4 database that lacks
/// objects of the hub's v4 (`missing`) first gets those of the v4 step made again where missing.
/// Ends by checking that the database now has every object a new one has.
fn apply_all(
    tx: &Transaction<'_>,
    version: u32,
    revision: u32,
    missing: &[String],
    now: OffsetDateTime,
) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    if version == CURRENT_SCHEMA_VERSION && !missing.is_empty() {
        let header = read_revision(tx)?;
        warnings.push(format!(
            "the v4 database lacks what its revision number (PRAGMA user_version = {header}) says it has ({}): \
             made by another program? The hub's additions are made where missing",
            missing.join(", ")
        ));
        // The steps' own objects, where missing (the data model names no index; another
        // implementation may have made none of the hub's).
        for sql in [
            include_str!("sql/v1.sql"),
            V1_TO_V2,
            V2_TO_V3,
            include_str!("sql/v4.sql"),
        ] {
            apply_idempotent(tx, sql).map_err(|source| StoreError::Migration {
                from: CURRENT_SCHEMA_VERSION,
                to: CURRENT_SCHEMA_VERSION,
                source: Box::new(source),
            })?;
        }
    }
    warnings.extend(apply_steps(tx, version, now)?);
    warnings.extend(apply_revisions(tx, revision, now)?);
    let still = missing_objects(tx, CURRENT_V4_REVISION)?;
    if !still.is_empty() {
        return Err(StoreError::Incompatible(format!(
            "в базе схемы v4 нет того, что требует модель данных и чего хаб не добавляет сам: {}",
            still.join(", ")
        )));
    }
    Ok(warnings)
}

/// The tables (with their columns) and indexes a new database has at a revision: every step and
/// the revisions up to it run on an empty database in memory, once per process and revision.
struct Shape {
    tables: Vec<(String, Vec<String>)>,
    indexes: Vec<String>,
}

fn reference_shape(revision: u32) -> Result<&'static Shape> {
    static SHAPES: [std::sync::OnceLock<Shape>; CURRENT_V4_REVISION as usize + 1] =
        [const { std::sync::OnceLock::new() }; CURRENT_V4_REVISION as usize + 1];
    let slot = &SHAPES[revision.min(CURRENT_V4_REVISION) as usize];
    if let Some(shape) = slot.get() {
        return Ok(shape);
    }
    let mut conn = rusqlite::Connection::open_in_memory()?;
    let tx = conn.transaction()?;
    apply_steps(&tx, 0, OffsetDateTime::UNIX_EPOCH)?;
    let context = StepContext {
        now: OffsetDateTime::UNIX_EPOCH,
    };
    for step in REVISIONS.iter().filter(|r| r.to <= revision) {
        (step.apply)(&tx, &context)?;
    }
    let shape = read_shape(&tx)?;
    Ok(slot.get_or_init(|| shape))
}

fn read_shape(conn: &rusqlite::Connection) -> Result<Shape> {
    let mut objects = conn.prepare(
        "SELECT type, name FROM sqlite_master
         WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
         ORDER BY type, name",
    )?;
    let objects = objects
        .query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut shape = Shape {
        tables: Vec::new(),
        indexes: Vec::new(),
    };
    for (kind, name) in objects {
        if kind == "index" {
            shape.indexes.push(name);
        } else {
            let columns = table_columns(conn, &name)?;
            shape.tables.push((name, columns));
        }
    }
    Ok(shape)
}

fn table_columns(conn: &rusqlite::Connection, table: &str) -> Result<Vec<String>> {
    let mut columns = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let columns = columns
        .query_map([table], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(columns)
}

/// What the database lacks of the tables, columns and indexes a new database has at `revision`
/// (`agent_request`, `command.lease_at`, `index command_queued`); objects it has besides are its
/// own business.
fn missing_objects(conn: &rusqlite::Connection, revision: u32) -> Result<Vec<String>> {
    let expected = reference_shape(revision)?;
    let found = read_shape(conn)?;
    let mut missing = Vec::new();
    for (table, columns) in &expected.tables {
        match found.tables.iter().find(|(name, _)| name == table) {
            None => missing.push(format!("table {table}")),
            Some((_, have)) => missing.extend(
                columns
                    .iter()
                    .filter(|column| !have.contains(column))
                    .map(|column| format!("{table}.{column}")),
            ),
        }
    }
    missing.extend(
        expected
            .indexes
            .iter()
            .filter(|index| !found.indexes.contains(index))
            .map(|index| format!("index {index}")),
    );
    Ok(missing)
}

/// Columns a revision's SQL added to the database when [`apply_idempotent`] ran it, as
/// `(table, column)`.
pub(super) type Added = Vec<(String, String)>;

/// Runs a revision's SQL so that running it on a database that already has some or all of
/// what it makes changes nothing: `CREATE TABLE`/`CREATE INDEX` get `IF NOT EXISTS`, `ALTER TABLE
/// … ADD COLUMN` runs only when `pragma_table_info` lacks the column, and an `UPDATE` (a
/// revision's backfill of its new columns) only when a column it sets was added just now; any
/// other statement (`DROP INDEX IF EXISTS`) runs as it is. Statements end with `;`, and `--`
/// starts a comment (neither may appear inside a literal of a revision's SQL).
pub(super) fn apply_idempotent(tx: &Transaction<'_>, sql: &str) -> Result<Added> {
    let code: String = sql
        .lines()
        .map(|line| line.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut added: Added = Vec::new();
    for statement in code.split(';') {
        let statement = statement.trim();
        if statement.is_empty() {
            continue;
        }
        let words: Vec<&str> = statement.split_whitespace().collect();
        let upper: Vec<String> = words
            .iter()
            .take(6)
            .map(|w| w.to_ascii_uppercase())
            .collect();
        let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
        match upper.as_slice() {
            ["ALTER", "TABLE", _, "ADD", "COLUMN", _, ..] | ["ALTER", "TABLE", _, "ADD", _, ..] => {
                let table = unquote(words[2]);
                let column = unquote(if upper[4] == "COLUMN" {
                    words[5]
                } else {
                    words[4]
                });
                if !table_columns(tx, &table)?.contains(&column) {
                    tx.execute_batch(statement)?;
                    added.push((table, column));
                }
            }
            ["CREATE", "TABLE" | "INDEX", next, ..] | ["CREATE", "UNIQUE", "INDEX", next, ..]
                if *next != "IF" =>
            {
                let keywords = if upper[1] == "UNIQUE" { 3 } else { 2 };
                let rest = strip_words(statement, keywords);
                let head = upper[..keywords].join(" ");
                tx.execute_batch(&format!("{head} IF NOT EXISTS {rest}"))?;
            }
            ["UPDATE", ..] => {
                let table = unquote(words[1]);
                let sets_added = update_targets(statement).iter().any(|column| {
                    added
                        .iter()
                        .any(|(t, c)| *t == table && c.eq_ignore_ascii_case(column))
                });
                if sets_added {
                    tx.execute_batch(statement)?;
                }
            }
            _ => tx.execute_batch(statement)?,
        }
    }
    Ok(added)
}

/// `statement` without its first `count` words.
fn strip_words(statement: &str, count: usize) -> &str {
    let mut rest = statement.trim_start();
    for _ in 0..count {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        rest = rest[end..].trim_start();
    }
    rest
}

fn unquote(name: &str) -> String {
    name.trim_matches(|c| c == '"' || c == '`' || c == '[' || c == ']')
        .to_string()
}

/// The columns an `UPDATE … SET a = …, b = … [WHERE …]` sets.
fn update_targets(statement: &str) -> Vec<String> {
    let upper = statement.to_ascii_uppercase();
    let Some(set) = upper.find(" SET ") else {
        return Vec::new();
    };
    let end = upper[set..]
        .find(" WHERE ")
        .map_or(upper.len(), |at| set + at);
    statement[set + " SET ".len()..end]
        .split(',')
        .filter_map(|assignment| assignment.split('=').next())
        .map(|column| unquote(column.trim()))
        .filter(|column| !column.is_empty())
        .collect()
}

/// How much of the file the migrating connection maps: nothing (see `migrate`).
const MIGRATION_MMAP_BYTES: i64 = 0;

fn backup_failed(from: u32) -> impl FnOnce(StoreError) -> StoreError {
    move |source| StoreError::Migration {
        from,
        to: CURRENT_SCHEMA_VERSION,
        source: Box::new(source),
    }
}

fn apply_steps(tx: &Transaction<'_>, from: u32, now: OffsetDateTime) -> Result<Vec<String>> {
    let context = StepContext { now };
    let mut warnings = Vec::new();
    for step in STEPS.iter().filter(|s| s.to > from) {
        let step_warnings = (step.apply)(tx, &context)
            .and_then(|w| {
                set_version(tx, step.to)?;
                Ok(w)
            })
            .map_err(|source| StoreError::Migration {
                from: step.to - 1,
                to: step.to,
                source: Box::new(source),
            })?;
        warnings.extend(step_warnings);
    }
    Ok(warnings)
}

/// The v4 revisions after `from` (0 on a database that was below v4 a moment ago).
fn apply_revisions(tx: &Transaction<'_>, from: u32, now: OffsetDateTime) -> Result<Vec<String>> {
    let context = StepContext { now };
    let mut warnings = Vec::new();
    for revision in REVISIONS.iter().filter(|r| r.to > from) {
        let revision_warnings = (revision.apply)(tx, &context)
            .and_then(|w| {
                tx.pragma_update(None, "user_version", revision.to)?;
                Ok(w)
            })
            .map_err(|source| StoreError::Migration {
                from: CURRENT_SCHEMA_VERSION,
                to: CURRENT_SCHEMA_VERSION,
                source: Box::new(source),
            })?;
        warnings.extend(revision_warnings);
    }
    Ok(warnings)
}

pub(super) fn read_revision(conn: &rusqlite::Connection) -> Result<u32> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

fn check_known_revision(revision: u32) -> Result<()> {
    if revision > CURRENT_V4_REVISION {
        return Err(StoreError::Incompatible(format!(
            "база данных схемы v4 ревизии {revision}, новее, чем знает этот jira-hub (ревизия {CURRENT_V4_REVISION}): запустите более новый jira-hub"
        )));
    }
    Ok(())
}

fn check_known(version: u32) -> Result<()> {
    if version > CURRENT_SCHEMA_VERSION {
        return Err(StoreError::Incompatible(format!(
            "база схемы v{version}, новее, чем знает этот jira-hub (v{CURRENT_SCHEMA_VERSION}): запустите более новый jira-hub"
        )));
    }
    Ok(())
}

/// The schema version: 0 for an empty file; an error for a database that is not a hub's.
pub(super) fn read_version(conn: &rusqlite::Connection) -> Result<u32> {
    let has_setting: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'setting')",
        [],
        |row| row.get(0),
    )?;
    if !has_setting {
        let objects: i64 =
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))?;
        if objects == 0 {
            return Ok(0);
        }
        return Err(StoreError::Incompatible(
            "файл — база SQLite, но не jira-hub (нет таблицы setting)".into(),
        ));
    }
    let value: Option<String> = conn
        .query_row(
            "SELECT value FROM setting WHERE key = ?1",
            [SCHEMA_VERSION],
            |row| row.get(0),
        )
        .optional()?;
    let Some(value) = value else {
        return Err(StoreError::Incompatible(
            "в таблице setting нет schema_version".into(),
        ));
    };
    value
        .trim()
        .trim_matches('"')
        .parse()
        .map_err(|_| StoreError::Incompatible(format!("schema_version {value} — не число")))
}

fn set_version(tx: &Transaction<'_>, version: u32) -> Result<()> {
    tx.execute(
        "INSERT INTO setting (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![SCHEMA_VERSION, version.to_string()],
    )?;
    Ok(())
}

/// Version 1, the first release (history/schema-v1.sql).
fn create_v1(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    tx.execute_batch(include_str!("sql/v1.sql"))?;
    Ok(Vec::new())
}

const V1_TO_V2: &str = "ALTER TABLE command ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0;
     UPDATE command SET deliveries = 1 WHERE status = 'claimed';";

const V2_TO_V3: &str = "CREATE TABLE issue_comment (
         id        TEXT PRIMARY KEY,
         issue_key TEXT NOT NULL,
         author    TEXT,
         body      TEXT NOT NULL,
         created   TEXT,
         updated   TEXT
     );
     CREATE INDEX issue_comment_issue ON issue_comment (issue_key);";

/// Version 2 counts deliveries. A v1 hub handed each claimed command out once.
fn v1_to_v2(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    tx.execute_batch(V1_TO_V2)?;
    Ok(Vec::new())
}

/// Version 3 mirrors comments.
fn v2_to_v3(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    tx.execute_batch(V2_TO_V3)?;
    Ok(Vec::new())
}

/// Version 4: projects replace the single base JQL (data-model «Схема базы хаба»).
fn v3_to_v4(tx: &Transaction<'_>, context: &StepContext) -> Result<Vec<String>> {
    tx.execute_batch(include_str!("sql/v4.sql"))?;

    let legacy_jql = read_setting(tx, LEGACY_BASE_JQL)?;
    let legacy_board = read_setting(tx, LEGACY_BOARD_ID)?;
    if legacy_jql.is_none() && legacy_board.is_none() {
        return Ok(Vec::new());
    }
    let converted = legacy_projects(legacy_jql.as_ref(), legacy_board.as_ref());
    let mut warnings = converted.warnings;
    for (i, project) in converted.projects.iter().enumerate() {
        // Distinct, increasing creation times keep the projects in the order of the old JQL.
        let created_at = format_utc(context.now + Duration::microseconds(i as i64));
        tx.execute(
            "INSERT INTO project (label, name, board_id, board_type, created_at)
             VALUES (?1, ?2, ?3, NULL, ?4)",
            params![project.label, project.name, project.board_id, created_at],
        )?;
    }

    let Some(old_jql) = legacy_jql.as_ref().and_then(Value::as_str) else {
        return Ok(warnings);
    };
    let project_key = read_setting(tx, PROJECT_KEY)?;
    let labels = converted.projects.iter().map(|p| p.label.as_str());
    let Some(new_jql) = base_jql(project_key.as_ref().and_then(Value::as_str), labels) else {
        if !converted.projects.is_empty() {
            warnings.push(
                "no project_key setting: refresh queries equal to the legacy base_jql were not rewritten"
                    .to_string(),
            );
        }
        return Ok(warnings);
    };
    tx.execute(
        "UPDATE sync_run SET query = ?1 WHERE query = ?2",
        params![new_jql, old_jql],
    )?;
    let mut select = tx.prepare(
        "SELECT id, params FROM command
         WHERE type = 'refresh' AND status IN ('queued', 'claimed')",
    )?;
    let refreshes = select
        .query_map([], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for (id, params_text) in refreshes {
        let Ok(mut params) = serde_json::from_str::<Value>(&params_text) else {
            warnings.push(format!(
                "command {id}: params are not JSON and were left as they are"
            ));
            continue;
        };
        if params.get("jql").and_then(Value::as_str) == Some(old_jql) {
            params["jql"] = Value::String(new_jql.clone());
            tx.execute(
                "UPDATE command SET params = ?1 WHERE id = ?2",
                params![params.to_string(), id],
            )?;
        }
    }
    Ok(warnings)
}

/// Revision 1 of v4: the lease of a claimed command in its own column (`claimed_at` stays the time
/// of the last delivery), the agent's own finishing time beside the hub's, who claimed a
/// command, whether a sync run was full (a fact of the run, fixed when it starts), and an index
/// for the dependents of a command.
fn v4_revision_1(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    let added = apply_idempotent(tx, include_str!("sql/v4r1.sql"))?;
    if !added
        .iter()
        .any(|(table, column)| table == "sync_run" && column == "full")
    {
        return Ok(Vec::new());
    }
    // Runs recorded before the revision: full when their query is the base JQL of today's
    // projects, as the hub judged them until now.
    let project_key = read_setting(tx, PROJECT_KEY)?;
    let mut select = tx.prepare("SELECT label FROM project ORDER BY created_at, label")?;
    let labels = select
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let base = base_jql(
        project_key.as_ref().and_then(Value::as_str),
        labels.iter().map(String::as_str),
    );
    tx.execute(
        "UPDATE sync_run SET full = (?1 IS NOT NULL AND query = ?1)",
        [base],
    )?;
    Ok(Vec::new())
}

/// Revision 2 of v4: a run's kind (`full`, `incremental`, `partial`) and scope, recorded when it
/// starts; when an issue's stored content last changed (`mirror_changed_at`, for
/// `updated_since`). Old runs are full or partial as revision 1 judged them; old issues changed
/// when they were last synced.
fn v4_revision_2(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r2.sql"))?;
    Ok(Vec::new())
}

/// Revision 3 of v4: a partial index of queued commands by batch and seq, so a claim walks the
/// queue in order without sorting it whole (100,000 queued commands claim as fast as 100).
fn v4_revision_3(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r3.sql"))?;
    Ok(Vec::new())
}

/// Revision 4 of v4: the earlier attempts of a retried command (`command_attempt`), and a
/// refresh's progress while it runs (`sync_run.pages`, `sync_run.total`).
fn v4_revision_4(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r4.sql"))?;
    Ok(Vec::new())
}

/// Revision 5 of v4: finished commands by finishing time (a partial index that covers the
/// console's hourly charts), so its overview reads the last days without scanning every command.
fn v4_revision_5(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r5.sql"))?;
    Ok(Vec::new())
}

/// Revision 6 of v4: the two indexes no query reads (`issue_link_jira_id`,
/// `issue_mirror_changed_at`) go; every ingested issue and link wrote them.
fn v4_revision_6(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r6.sql"))?;
    Ok(Vec::new())
}

/// Revision 7 of v4: `command.not_before`, the time before which a command its agent gave back
/// (`released`: a write's answer was lost and the write may still be running in Jira) is not
/// handed out again.
fn v4_revision_7(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r7.sql"))?;
    Ok(Vec::new())
}

/// Revision 8 of v4: `held_prune`, the removals of full runs held for a
/// confirmation.
fn v4_revision_8(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r8.sql"))?;
    Ok(Vec::new())
}

/// Revision 9: the last preflight of each agent (`agent_status.last_check`).
fn v4_revision_9(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r9.sql"))?;
    Ok(Vec::new())
}

/// Revision 10: a sync run knows its batch (`sync_run.batch_id`), earlier runs filled in from
/// their command.
fn v4_revision_10(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r10.sql"))?;
    Ok(Vec::new())
}

/// Revision 11: since when each agent has said Jira is held for it
/// (`agent_status.jira_down_since`).
fn v4_revision_11(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r11.sql"))?;
    Ok(Vec::new())
}

/// Revision 12: each agent's heartbeat period (`agent_status.heartbeat_seconds`).
fn v4_revision_12(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r12.sql"))?;
    Ok(Vec::new())
}

/// Revision 13: a command's uncounted give-backs (`command.uncounted_releases`,
/// `command.uncounted_since`).
fn v4_revision_13(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r13.sql"))?;
    Ok(Vec::new())
}

/// Revision 14: the call a command's last give-back was refused on
/// (`command.released_refusal`).
fn v4_revision_14(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r14.sql"))?;
    Ok(Vec::new())
}

/// Revision 15 (a versioned agent protocol): why a queued command waits for an agent that can
/// honour it (`command.withheld`), and what each agent said of itself (`agent_status.peer`).
fn v4_revision_15(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r15.sql"))?;
    Ok(Vec::new())
}

/// Revision 16: the highest id issued per table (`id_issued`), so that ids are never reused.
fn v4_revision_16(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, ID_ISSUED)?;
    Ok(Vec::new())
}

/// Revision 16's SQL; `restore` also runs it on a copy of an older revision, to raise its ids.
pub(super) const ID_ISSUED: &str = include_str!("sql/v4r16.sql");

/// Revision 17: the answers given to requests with an `Idempotency-Key` (`idempotency_key`).
fn v4_revision_17(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r17.sql"))?;
    Ok(Vec::new())
}

/// Revision 18: the edits of an issue by its key (`command_edit_key`), for the base of a new edit.
fn v4_revision_18(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r18.sql"))?;
    Ok(Vec::new())
}

/// Revision 19: the issues a refresh run received and could not store (`sync_run_unstored`),
/// seen all the same when the run's end removes what it missed.
fn v4_revision_19(tx: &Transaction<'_>, _: &StepContext) -> Result<Vec<String>> {
    apply_idempotent(tx, include_str!("sql/v4r19.sql"))?;
    Ok(Vec::new())
}

fn read_setting(tx: &Transaction<'_>, key: &str) -> Result<Option<Value>> {
    let text: Option<String> = tx
        .query_row("SELECT value FROM setting WHERE key = ?1", [key], |row| {
            row.get(0)
        })
        .optional()?;
    Ok(text.map(|t| serde_json::from_str(&t).unwrap_or(Value::String(t))))
}
