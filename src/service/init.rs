//! `jira-hub init --config FILE`: the legacy config imported into a new (or, with `--force`,
//! an existing) database, with fresh tokens.

use super::tokens::generate_tokens;
use super::{HubConnection, Result, ServiceError};
use crate::domain::config::import_legacy_config;
use crate::domain::settings::Tokens;
use crate::domain::time::Utc;
use crate::store::settings::{InitOutcome, InitWrite};
use serde_json::Value;
use time::Duration;

/// What `init` did, for the operator.
#[derive(Debug)]
pub struct InitReport {
    pub tokens: Tokens,
    pub imported_keys: Vec<String>,
    pub created_projects: Vec<String>,
    pub ignored_keys: Vec<String>,
    pub warnings: Vec<String>,
    pub settings_version: i64,
}

/// Why `init` refuses a database that already has settings.
pub(crate) const ALREADY_INITIALIZED: &str =
    "в базе уже есть настройки; чтобы импортировать конфиг поверх них, добавьте --force";

impl HubConnection {
    /// Imports `config`. Refuses (nothing changed) a bad value, naming its key, and a database
    /// that already has settings unless `force`. Existing tokens are kept, so that re-importing a
    /// config never disconnects a running agent; new ones are made only when there are none.
    pub fn init_from_config(&mut self, config: &Value, force: bool) -> Result<InitReport> {
        let imported = import_legacy_config(config)?;
        let now = self.clock.now();
        let created_at: Vec<Utc> = (0..imported.projects.len())
            .map(|i| Utc::new(now + Duration::microseconds(i as i64)))
            .collect();
        let new_tokens = generate_tokens()?;
        let outcome = self.store.init_settings(&InitWrite {
            settings: &imported.settings,
            new_tokens,
            projects: &imported.projects,
            created_at: &created_at,
            force,
        })?;
        match outcome {
            InitOutcome::AlreadyInitialized => Err(ServiceError::Conflict {
                field: "settings".into(),
                message: ALREADY_INITIALIZED.into(),
            }),
            InitOutcome::Done {
                tokens,
                created_projects,
                settings_version,
            } => {
                for warning in &imported.warnings {
                    tracing::warn!("{warning}");
                }
                Ok(InitReport {
                    tokens,
                    imported_keys: imported.settings.into_iter().map(|(k, _)| k).collect(),
                    created_projects,
                    ignored_keys: imported.ignored_keys,
                    warnings: imported.warnings,
                    settings_version,
                })
            }
        }
    }
}
