//! The conflict check on the hub's side: the base an edit is enqueued with (the mirror's values of the
//! fields it sets, or the client's own), and the operator's two answers to a conflict: a retry
//! that overwrites the fields in conflict, and «Оставить как в Jira» (the command ends
//! `cancelled`, its dependents stay skipped with that reason).

use super::views::CommandView;
use super::{HubConnection, Result, ServiceError};
use crate::domain::command::{CommandStatus, CommandType, NewCommand};
use crate::domain::edit;
use crate::domain::settings::Settings;
use crate::domain::time::Utc;
use crate::store::Tx;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Puts a base into every edit of a batch being enqueued (`params.base`): an edit of an issue
/// created in the same batch (`{"$result": "key"}`) needs none; one that sets no checked field
/// (only labels) neither. A field an earlier edit of the same issue sets, which no
/// refresh has read since (still to be written, or written after the mirror last read the
/// issue), is based on that edit's wanted value: the hub's own write is what Jira will hold, not
/// a change to stop on (see [`earlier_wanted`]).
pub(super) fn record_bases(
    tx: &Tx<'_>,
    commands: &mut [NewCommand],
    settings: &Settings,
) -> Result<()> {
    // The wanted values of the edits earlier in this batch, by issue and field, with their seq.
    let mut in_batch: BTreeMap<(String, &'static str), (i64, Value)> = BTreeMap::new();
    for command in commands
        .iter_mut()
        .filter(|c| c.command_type == CommandType::EnsureIssue)
    {
        let Some(key) = command.params.get("key").and_then(Value::as_str) else {
            continue;
        };
        let set = edit::fields_set(&command.params);
        if set.is_empty() {
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
        let mut base = edit::base_of(
            &command.params,
            client.as_ref(),
            mirror,
            &settings.field_ids,
        );
        let given: Vec<String> = client
            .as_ref()
            .and_then(|c| c.get("fields"))
            .and_then(Value::as_object)
            .map(|f| f.keys().cloned().collect())
            .unwrap_or_default();
        let stored = earlier_wanted(tx, &key, row.as_ref().map(|r| &r.synced_at), settings)?;
        let mut after = Map::new();
        for logical in set.iter().filter(|f| !given.iter().any(|g| g == *f)) {
            let earlier = match in_batch.get(&(key.clone(), *logical)) {
                Some((seq, wanted)) => Some((json!({"seq": seq}), wanted.clone())),
                None => stored
                    .get(*logical)
                    .map(|(id, wanted)| (json!({"command": id}), wanted.clone())),
            };
            if let Some((which, wanted)) = earlier {
                base["fields"][*logical] = wanted;
                after.insert((*logical).into(), which);
            }
        }
        if !after.is_empty() {
            // A base made of earlier edits' values is checked like the mirror's: no longer «none».
            if base["from"] == edit::FROM_NONE {
                base["from"] = edit::FROM_EDITS.into();
                if let Some(map) = base.as_object_mut() {
                    map.remove("note");
                }
            }
            base["after_edits"] = Value::Object(after);
        }
        for logical in set {
            if let Some(wanted) =
                edit::wanted_value(logical, &command.params, &settings.priority_map)
            {
                in_batch.insert((key.clone(), logical), (command.seq, wanted));
            }
        }
        command.params["base"] = base;
    }
    Ok(())
}

/// The wanted value, by checked field, of the newest earlier edit of `key` that sets it and that
/// no refresh has read: one still queued, claimed or given back, or done after the mirror last
/// read the issue (`synced_at`; `None`: the mirror does not hold it). An edit that failed,
/// was cancelled or skipped wrote nothing and is passed over; one done before the mirror's read
/// is in the mirror, and so are the older ones beneath it. With its command id.
fn earlier_wanted(
    tx: &Tx<'_>,
    key: &str,
    synced_at: Option<&Utc>,
    settings: &Settings,
) -> Result<BTreeMap<&'static str, (i64, Value)>> {
    let mut found = BTreeMap::new();
    let mut read_by_mirror: Vec<&'static str> = Vec::new();
    for earlier in tx.live_edits_of(key)? {
        let read = earlier.status == CommandStatus::Done
            && match (&earlier.finished_at, synced_at) {
                (Some(finished), Some(synced)) => finished <= synced,
                _ => false,
            };
        for logical in edit::fields_set(&earlier.params) {
            if found.contains_key(logical) || read_by_mirror.contains(&logical) {
                continue;
            }
            if read {
                read_by_mirror.push(logical);
            } else if let Some(wanted) =
                edit::wanted_value(logical, &earlier.params, &settings.priority_map)
            {
                found.insert(logical, (earlier.id, wanted));
            }
        }
    }
    Ok(found)
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
