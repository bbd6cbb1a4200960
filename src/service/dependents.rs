//! The dependents of an edit left as it is in Jira («Оставить как в Jira»): they stay skipped in
//! their batch (a cancelled command is never retried, so a retry there would skip them again at
//! once), and the operator may enqueue copies of them as a new batch, in which they run on the
//! issue as Jira holds it (see docs/design/conflicts.md, "Keep-Jira's dependents").

use super::batches::{NewBatch, enqueue_in};
use super::views::BatchView;
use super::{HubConnection, Result, ServiceError};
use crate::domain::command::{CommandRequest, CommandStatus, substitute_result};
use crate::domain::edit;
use crate::store::{CommandRow, Tx};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// How the reason of a skipped command begins once a copy of it was enqueued in a new batch: it
/// is not offered, nor copied, again.
pub const ENQUEUED_AGAIN: &str = "поставлена снова";

/// Whether a skipped command's reason says a copy of it was already enqueued.
pub fn enqueued_again(error: Option<&str>) -> bool {
    error.is_some_and(|e| e.starts_with(ENQUEUED_AGAIN))
}

fn refused(message: String) -> ServiceError {
    ServiceError::Conflict {
        field: "command".into(),
        message,
    }
}

/// The commands skipped because of `id`, transitively, not yet enqueued again; in the batch's
/// order (a dependency before its dependents).
fn stranded(tx: &Tx<'_>, id: i64) -> Result<Vec<CommandRow>> {
    let mut found = Vec::new();
    // A work list, not recursion: a chain of dependents is as deep as the batch is long.
    let mut pending = vec![id];
    while let Some(of) = pending.pop() {
        for dependent in tx.dependents(of)? {
            if dependent.status == CommandStatus::Skipped
                && !enqueued_again(dependent.error.as_deref())
            {
                pending.push(dependent.id);
                found.push(dependent);
            }
        }
    }
    found.sort_by_key(|c| c.seq);
    Ok(found)
}

impl HubConnection {
    /// «Поставить зависящие новым пакетом»: copies of the commands skipped because the edit `id`
    /// was left as it is in Jira, enqueued as one new batch (same project, the operator as its
    /// author), validated as any batch is. A `$result` key taken from the edit is the edit's
    /// issue (it exists; only its fields were kept); a dependency between the copies is kept; an
    /// edit among them gets a new base from the mirror. The skipped commands stay skipped, their
    /// reason naming their copy, so they are not enqueued twice. All or nothing.
    pub fn enqueue_dependents_again(&mut self, id: i64, author: &str) -> Result<BatchView> {
        let now = self.now();
        let view = self.store.transact(|tx| {
            let kept = tx
                .command(id)?
                .ok_or_else(|| ServiceError::NotFound(format!("Команды {id} нет")))?;
            if kept.status != CommandStatus::Cancelled
                || edit::conflict_of(kept.result.as_ref()).is_none()
            {
                return Err(refused(format!(
                    "пакет {}, команда {}: статус «{}»; новым пакетом ставятся только команды, зависящие от правки, оставленной как в Jira",
                    kept.batch_id,
                    kept.seq,
                    kept.status.label()
                )));
            }
            let batch = tx.batch(kept.batch_id)?.ok_or_else(|| {
                ServiceError::NotFound(format!("Пакета {} нет", kept.batch_id))
            })?;
            let copied = stranded(tx, id)?;
            if copied.is_empty() {
                return Err(refused(format!(
                    "пакет {}, команда {}: пропущенных команд, зависящих от неё, нет (или они уже поставлены снова)",
                    kept.batch_id, kept.seq
                )));
            }
            let Some(key) = kept.params.get("key").and_then(Value::as_str) else {
                return Err(refused(format!(
                    "пакет {}, команда {}: у правки нет ключа задачи, зависящим от неё нечего подставить",
                    kept.batch_id, kept.seq
                )));
            };
            // What the kept edit would have answered: the issue exists, only its fields stayed.
            let kept_result = json!({ "key": key });
            let mut seq_of: BTreeMap<i64, i64> = BTreeMap::new();
            let mut requests = Vec::with_capacity(copied.len());
            for (n, command) in copied.iter().enumerate() {
                let mut params = command.params.clone();
                if let Some(map) = params.as_object_mut() {
                    // Made at the original enqueue, for the original moment: the copy is checked
                    // against the mirror as it is now.
                    map.remove("base");
                    map.remove("overwrite");
                }
                let depends_on = match command.depends_on {
                    Some(of) if of == id => {
                        params = substitute_result(&params, Some(&kept_result)).map_err(|e| {
                            refused(format!("пакет {}, команда {}: {e}", command.batch_id, command.seq))
                        })?;
                        None
                    }
                    Some(of) => seq_of.get(&of).copied(),
                    None => None,
                };
                seq_of.insert(command.id, n as i64 + 1);
                requests.push(CommandRequest {
                    command_type: command.command_type.as_str().to_string(),
                    params,
                    depends_on,
                });
            }
            let title = format!(
                "Зависящие от команды {} пакета {} (оставлено как в Jira)",
                kept.seq, kept.batch_id
            );
            let new = NewBatch {
                title: &title,
                author,
                project: batch.project.as_deref(),
                commands: &requests,
            };
            let view = enqueue_in(tx, &new, &now)?;
            for (command, copy) in copied.iter().zip(&view.commands) {
                tx.reword_skipped(
                    command.id,
                    &format!(
                        "{ENQUEUED_AGAIN}: пакет {}, команда {} (команда {} этого пакета, от которой она зависит, оставлена как в Jira)",
                        view.id, copy.seq, kept.seq
                    ),
                )?;
            }
            Ok(view)
        })?;
        tracing::info!(
            batch = view.id,
            commands = view.commands.len(),
            of_command = id,
            by = author,
            "dependents of a command left as in Jira enqueued again"
        );
        self.work.bump();
        Ok(view)
    }
}
