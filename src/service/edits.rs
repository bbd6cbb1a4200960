//! The conflict check on the hub's side: the base an edit is enqueued with (the mirror's values of the
//! fields it sets, or the client's own), and the operator's two answers to a conflict: a retry
//! that overwrites the fields in conflict, and «Оставить как в Jira» (the command ends
//! `cancelled`, its dependents stay skipped with that reason).

use super::views::CommandView;
use super::{HubConnection, Result, ServiceError};
use crate::domain::command::{CommandStatus, CommandType, NewCommand};
use crate::domain::edit;
use crate::domain::settings::Settings;
use crate::store::Tx;
use serde_json::Value;

/// Puts a base into every edit of a batch being enqueued (`params.base`): an edit of an issue
/// created in the same batch (`{"$result": "key"}`) needs none; one that sets no checked field
/// (only labels, a sprint) neither.
pub(super) fn record_bases(
    tx: &Tx<'_>,
    commands: &mut [NewCommand],
    settings: &Settings,
) -> Result<()> {
    for command in commands
        .iter_mut()
        .filter(|c| c.command_type == CommandType::EnsureIssue)
    {
        let Some(key) = command.params.get("key").and_then(Value::as_str) else {
            continue;
        };
        if edit::fields_set(&command.params).is_empty() {
            continue;
        }
        let key = key.to_string();
        let row = tx.issue(&key)?;
        let raw = match &row {
            Some(_) => tx.issue_fields(&key)?,
            None => None,
        };
        let updated = row
            .as_ref()
            .and_then(|r| r.mirrored.updated_at.as_ref())
            .map(|u| u.as_str().to_string());
        let mirror = raw
            .as_ref()
            .and_then(Value::as_object)
            .map(|fields| (fields, updated.as_deref()));
        let client = command.params.get("base").cloned();
        let base = edit::base_of(
            &command.params,
            client.as_ref(),
            mirror,
            &settings.field_ids,
        );
        command.params["base"] = base;
    }
    Ok(())
}

/// What a retry does to an edit's params: an overwrite names the fields in conflict
/// (`params.overwrite`), which the agent then writes whatever Jira holds; a plain retry drops an
/// earlier overwrite and checks every field against the base again.
pub(super) fn prepare_retry(tx: &Tx<'_>, id: i64, overwrite: bool) -> Result<()> {
    let Some(command) = tx.command(id)? else {
        return Err(ServiceError::NotFound(format!("команды {id} нет")));
    };
    let mut params = command.params.clone();
    if overwrite {
        let Some(conflict) = edit::conflict_of(command.result.as_ref()) else {
            return Err(ServiceError::Conflict {
                field: "overwrite".into(),
                message: format!(
                    "пакет {}, команда {}: конфликта с Jira нет, записывать поверх нечего; повторите без overwrite",
                    command.batch_id, command.seq
                ),
            });
        };
        params["overwrite"] = edit::conflict_fields(conflict).into();
    } else if let Some(map) = params.as_object_mut() {
        map.remove("overwrite");
    }
    if params != command.params {
        tx.set_command_params(id, &params)?;
    }
    Ok(())
}

impl HubConnection {
    /// «Записать поверх», `commands retry ID --overwrite`, `POST /commands/{id}/retry
    /// {"overwrite": true}`: the command that failed on a conflict is queued again and writes
    /// the fields in conflict over what Jira holds (the other fields are checked again).
    pub fn retry_overwriting(&mut self, id: i64) -> Result<CommandView> {
        self.retry_command_as(id, true)
    }

    /// «Оставить как в Jira»: the command that failed on a conflict ends `cancelled` by the
    /// operator, nothing is written; the commands skipped because of it (transitively) keep
    /// their status with this reason.
    pub fn keep_jira(&mut self, id: i64, by: &str) -> Result<CommandView> {
        let now = self.now();
        self.store.transact(|tx| {
            let command = tx
                .command(id)?
                .ok_or_else(|| ServiceError::NotFound(format!("команды {id} нет")))?;
            let conflict = edit::conflict_of(command.result.as_ref())
                .filter(|_| command.status == CommandStatus::Failed)
                .ok_or_else(|| ServiceError::Conflict {
                    field: "command".into(),
                    message: format!(
                        "пакет {}, команда {}: статус «{}», конфликта с Jira нет; оставить как в Jira можно только команду, остановленную конфликтом",
                        command.batch_id,
                        command.seq,
                        command.status.label()
                    ),
                })?;
            let fields = edit::conflict_fields(conflict)
                .iter()
                .map(|f| format!("«{}»", edit::field_label(f)))
                .collect::<Vec<_>>()
                .join(", ");
            let reason = format!("Оставлено как в Jira ({by}): не записаны поля {fields}");
            tx.cancel_failed_command(id, &now, &reason)?;
            let dependent_reason = format!(
                "команда {} этого пакета, от которой зависит эта, отменена: оператор оставил как в Jira ({fields})",
                command.seq
            );
            let mut pending = vec![id];
            while let Some(of) = pending.pop() {
                for dependent in tx.dependents(of)? {
                    if tx.reword_skipped(dependent.id, &dependent_reason)? {
                        pending.push(dependent.id);
                    }
                }
            }
            tracing::info!(batch = command.batch_id, command = command.seq, command_id = id, by, "conflict left as it is in Jira");
            let row = tx
                .command(id)?
                .ok_or_else(|| ServiceError::NotFound(format!("команды {id} нет")))?;
            Ok(CommandView::with_attempts(row, tx.attempts_of(id)?))
        })
    }
}
