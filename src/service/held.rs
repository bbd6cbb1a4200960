//! Full refreshes whose removals wait for an operator: what they would remove, and
//! their confirmation (`POST /sync-runs/{id}/confirm`, `jira-hub refresh confirm RUN`, the
//! console).

use super::{HubConnection, Result, ServiceError};
use crate::domain::time::Utc;
use crate::store::HeldRow;
use serde::Serialize;
use serde_json::Value;

/// A full run held because it would remove too much of the mirror.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct HeldRunView {
    pub run_id: i64,
    /// The refresh's batch: people name a refresh by its batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<i64>,
    #[schema(value_type = String)]
    pub started_at: Utc,
    #[schema(value_type = String)]
    pub held_at: Utc,
    /// How many issues confirming it removes (those still not seen since the run started).
    pub would_remove: i64,
    /// The projects over `prune_guard`: `[{"label", "issues", "missing"}]`.
    #[schema(value_type = Vec<Object>)]
    pub projects: Value,
    /// Up to 20 of the keys it would remove, for a look in Jira before confirming.
    pub sample_keys: Vec<String>,
}

impl From<HeldRow> for HeldRunView {
    fn from(row: HeldRow) -> Self {
        HeldRunView {
            run_id: row.run_id,
            batch_id: row.batch_id,
            started_at: row.started_at,
            held_at: row.held_at,
            would_remove: row.count,
            projects: serde_json::from_str(&row.projects).unwrap_or(Value::Null),
            sample_keys: row.keys.into_iter().take(20).collect(),
        }
    }
}

/// What a confirmation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ConfirmedView {
    pub run_id: i64,
    /// Issues removed from the mirror (a held issue seen again since is kept).
    pub removed: usize,
}

impl HubConnection {
    /// Held full runs, newest first.
    pub fn held_runs(&self) -> Result<Vec<HeldRunView>> {
        Ok(self
            .store
            .held_runs()?
            .into_iter()
            .map(HeldRunView::from)
            .collect())
    }

    /// Applies a held run's removals: the issues it missed that no run has seen since it
    /// started. 404 for a run that does not exist, 409 for one that is not held (already
    /// confirmed, superseded, or never held): confirming twice removes nothing twice.
    pub fn confirm_run(&mut self, run_id: i64, by: &str) -> Result<ConfirmedView> {
        let now = self.now();
        self.store.transact(|tx| {
            let Some(held) = tx.held(run_id)? else {
                let exists = tx.runs(i64::MAX)?.iter().any(|r| r.id == run_id);
                return Err(if exists {
                    ServiceError::Conflict {
                        field: "run".into(),
                        message: format!(
                            "обновление №{run_id} не ждёт подтверждения (уже подтверждено, заменено новым или ничего не удерживало)"
                        ),
                    }
                } else {
                    ServiceError::NotFound(format!("Обновления №{run_id} нет"))
                });
            };
            let removed = tx.prune_keys(&held.keys, &held.started_at)?;
            tx.confirm_held(run_id, &now, by)?;
            tracing::info!(run = run_id, removed, by, "held removals confirmed");
            Ok(ConfirmedView { run_id, removed })
        })
    }
}
