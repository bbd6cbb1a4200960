//! What the conflict check adds to the `command` table's rows: an edit's params changed for an overwrite,
//! a conflict left as it is in Jira (`cancelled` by the operator), and the count of conflicts.
//! Conflicts live in the rows the hub already has: a failed edit's `result.conflict`.

use super::Result;
use super::tx::Tx;
use crate::domain::time::Utc;
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

/// A command's result holds a conflict (`result.conflict` is an object).
const HAS_CONFLICT: &str = "json_type(result, '$.conflict') = 'object'";

impl Tx<'_> {
    /// Replaces the params of a command that is not out with an agent (a retry that overwrites).
    pub(crate) fn set_command_params(&self, id: i64, params: &Value) -> Result<bool> {
        Ok(self
            .0
            .prepare_cached(
                "UPDATE command SET params = ?2 WHERE id = ?1 AND status IN ('queued', 'failed', 'skipped')",
            )?
            .execute(params![id, params.to_string()])?
            == 1)
    }

    /// A failed command ends `cancelled` with `error` (its result, the conflict, stays).
    pub(crate) fn cancel_failed_command(&self, id: i64, at: &Utc, error: &str) -> Result<bool> {
        let kind = self
            .0
            .prepare_cached(
                "UPDATE command SET status = 'cancelled', finished_at = ?2, error = ?3
                 WHERE id = ?1 AND status = 'failed' RETURNING type",
            )?
            .query_row(params![id, at, error], |row| row.get::<_, String>(0))
            .optional()?;
        if let Some(kind) = &kind {
            // Failed, and now cancelled: each final status a command reaches is counted.
            self.1
                .borrow_mut()
                .finished(crate::domain::command::CommandStatus::Cancelled, kind);
        }
        Ok(kind.is_some())
    }

    /// A skipped command's reason, said again (its dependency ended otherwise).
    pub(crate) fn reword_skipped(&self, id: i64, error: &str) -> Result<bool> {
        Ok(self
            .0
            .prepare_cached("UPDATE command SET error = ?2 WHERE id = ?1 AND status = 'skipped'")?
            .execute(params![id, error])?
            == 1)
    }

    /// Commands of a batch `failed` now on a conflict.
    pub(crate) fn batch_conflicts(&self, batch_id: i64) -> Result<i64> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT count(*) FROM command
                 WHERE batch_id = ?1 AND status = 'failed' AND result IS NOT NULL AND {HAS_CONFLICT}"
            ))?
            .query_row([batch_id], |row| row.get(0))?)
    }
}

impl super::Store {
    /// How many queued commands wait for an agent that can honour them (`command.withheld`).
    pub(crate) fn withheld_commands(&self) -> Result<i64> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM command WHERE status = 'queued' AND withheld IS NOT NULL",
            )?
            .query_row([], |row| row.get(0))?)
    }

    /// Commands `failed` now on a conflict (`/metrics`' snapshot: walks the failed commands
    /// through the `command_status` index, only when the database changed).
    pub(crate) fn failed_on_conflict(&self) -> Result<i64> {
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT count(*) FROM command
                 WHERE status = 'failed' AND result IS NOT NULL AND {HAS_CONFLICT}"
            ))?
            .query_row([], |row| row.get(0))?)
    }
}
