//! The `setting` table: key → JSON text. Which keys and values are valid is `domain::settings`;
//! here they are read and written, `settings_version` is bumped in the same transaction as the
//! write it counts, and the tokens are stored.

use super::{Result, Store, StoreError};
use crate::domain::project::NewProject;
use crate::domain::settings::{
    CLOSED_STATUSES, DEFAULT_CLOSED_STATUSES, PROJECT_KEY, SETTINGS_VERSION, TOKENS, Tokens,
};
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde_json::Value;
use std::collections::BTreeMap;

fn upsert(tx: &Transaction<'_>, key: &str, value: &Value) -> Result<()> {
    tx.execute(
        "INSERT INTO setting (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![key, value.to_string()],
    )?;
    Ok(())
}

/// `settings_version` + 1, inside the transaction of the change it counts. Returns the new value.
fn bump_version(tx: &Transaction<'_>) -> Result<i64> {
    let current: Option<String> = tx
        .query_row(
            "SELECT value FROM setting WHERE key = ?1",
            [SETTINGS_VERSION],
            |row| row.get(0),
        )
        .optional()?;
    let next = current
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(0)
        + 1;
    upsert(tx, SETTINGS_VERSION, &Value::from(next))?;
    Ok(next)
}

pub(super) fn read_all(conn: &Connection) -> Result<BTreeMap<String, Value>> {
    let mut statement = conn.prepare("SELECT key, value FROM setting")?;
    let rows = statement.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
    })?;
    let mut settings = BTreeMap::new();
    for row in rows {
        let (key, text) = row?;
        match serde_json::from_str(&text) {
            Ok(value) => {
                settings.insert(key, value);
            }
            Err(error) => tracing::warn!(key, %error, "stored setting is not JSON; ignored"),
        }
    }
    Ok(settings)
}

/// Settings a hub must find on any database it opened: `closed_statuses` appears with its
/// default on a database that lacks it (data-model «Настройки»). Writes only when it is missing.
pub(super) fn ensure_defaults(store: &mut Store) -> Result<()> {
    let present: bool = store.conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM setting WHERE key = ?1)",
        [CLOSED_STATUSES],
        |row| row.get(0),
    )?;
    if !present {
        store.write(|tx| {
            tx.execute(
                "INSERT OR IGNORE INTO setting (key, value) VALUES (?1, ?2)",
                params![
                    CLOSED_STATUSES,
                    Value::from(DEFAULT_CLOSED_STATUSES.to_vec()).to_string()
                ],
            )?;
            Ok(())
        })?;
    }
    Ok(())
}

/// What `init` stores in one transaction.
pub(crate) struct InitWrite<'a> {
    pub settings: &'a [(String, Value)],
    /// Tokens to store when the database has none.
    pub new_tokens: Tokens,
    pub projects: &'a [NewProject],
    /// Creation times, one per project, increasing.
    pub created_at: &'a [crate::domain::time::Utc],
    /// Overwrite settings a previous `init` stored.
    pub force: bool,
}

/// The result of [`Store::init_settings`].
#[derive(Debug)]
pub(crate) enum InitOutcome {
    /// Written; the tokens in force and the labels of the projects that were created.
    Done {
        tokens: Tokens,
        created_projects: Vec<String>,
        settings_version: i64,
    },
    /// The database already has settings and `force` was not given; nothing was written.
    AlreadyInitialized,
}

impl Store {
    /// Every stored setting, parsed.
    pub(crate) fn settings_raw(&self) -> Result<BTreeMap<String, Value>> {
        read_all(&self.conn)
    }

    /// Writes already validated values and bumps `settings_version`, all in one transaction.
    /// Returns the new version.
    pub(crate) fn write_settings(&mut self, values: &[(String, Value)]) -> Result<i64> {
        self.write(|tx| {
            for (key, value) in values {
                upsert(tx, key, value)?;
            }
            bump_version(tx)
        })
    }

    /// Replaces one token (`jira-hub tokens --rotate`); returns both tokens in force.
    pub(crate) fn rotate_token(&mut self, agent: bool, fresh: String) -> Result<Option<Tokens>> {
        self.write(|tx| {
            let Some(mut tokens) = read_tokens(tx)? else {
                return Ok(None);
            };
            if agent {
                tokens.agent = fresh;
            } else {
                tokens.client = fresh;
            }
            upsert(tx, TOKENS, &serde_json::to_value(&tokens)?)?;
            bump_version(tx)?;
            Ok(Some(tokens))
        })
    }

    /// `jira-hub init`: settings, tokens and projects in one transaction, refused (nothing
    /// written) when the database already has settings and `force` is not set. Projects whose
    /// label already exists (case-insensitively) are left as they are.
    pub(crate) fn init_settings(&mut self, write: &InitWrite<'_>) -> Result<InitOutcome> {
        self.write(|tx| {
            let existing_tokens = read_tokens(tx)?;
            let has_settings: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM setting WHERE key IN (?1, ?2))",
                [PROJECT_KEY, TOKENS],
                |row| row.get(0),
            )?;
            if has_settings && !write.force {
                return Ok(InitOutcome::AlreadyInitialized);
            }
            for (key, value) in write.settings {
                upsert(tx, key, value)?;
            }
            let tokens = match existing_tokens {
                Some(tokens) => tokens,
                None => {
                    upsert(tx, TOKENS, &serde_json::to_value(&write.new_tokens)?)?;
                    write.new_tokens.clone()
                }
            };
            let mut created_projects = Vec::new();
            for (project, created_at) in write.projects.iter().zip(write.created_at) {
                match super::projects::insert_in(tx, project, created_at) {
                    Ok(_) => created_projects.push(project.label.clone()),
                    Err(StoreError::Conflict { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
            let settings_version = bump_version(tx)?;
            Ok(InitOutcome::Done {
                tokens,
                created_projects,
                settings_version,
            })
        })
    }
}

fn read_tokens(tx: &Transaction<'_>) -> Result<Option<Tokens>> {
    let text: Option<String> = tx
        .query_row(
            "SELECT value FROM setting WHERE key = ?1",
            [TOKENS],
            |row| row.get(0),
        )
        .optional()?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}
