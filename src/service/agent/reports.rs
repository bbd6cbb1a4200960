//! Reports: each command's result applied (done, failed, released, conflict), a run ended once,
//! and what Jira's state confirms of a result that was lost.

use super::Now;
use super::claims::skip_dependents;
use super::leases::{keep_alive, release};
use super::refresh::{Ingested, Mapped, Premapped, complete_refresh, ingest_page};
use crate::domain::command::{
    CommandStatus, CommandType, RunStatus, is_result_reference, substitute_result, truncate_error,
};
use crate::domain::issue::MirrorFields;
use crate::domain::settings::{Settings, TransitionTarget};
use crate::domain::time::{Utc, parse_utc};
use crate::protocol::{CommandResult, Ignored, Kind, ReportAnswer, ReportRequest, ResultStatus};
use crate::service::Result;
use crate::service::batches::settings_in;
use crate::store::{CommandRow, Finish, Tx};
use serde_json::{Value, json};

/// Applies a report; returns the answer and whether it brought rate limiting (`None` when it
/// carried no accepted result, so pacing stays as it is).
pub(super) fn report_in(
    tx: &Tx<'_>,
    report: &ReportRequest,
    now: &Now,
    ingested: &mut Ingested,
    mut premapped: Option<&mut Premapped>,
) -> Result<(ReportAnswer, Option<bool>)> {
    let settings = settings_in(tx)?;
    let mut accepted = Vec::new();
    let mut ignored = Vec::new();
    let mut rate_limited = None;
    for (index, result) in report.results.iter().enumerate() {
        let mapped = premapped
            .as_deref_mut()
            .and_then(|premapped| premapped.take_page(index, &settings));
        match apply_result(tx, &settings, result, now, ingested, mapped)? {
            Ok(()) => {
                accepted.push(result.command_id);
                let limited = result.rate_limited > 0;
                rate_limited = Some(rate_limited.unwrap_or(false) || limited);
            }
            Err(reason) => ignored.push(Ignored {
                command_id: result.command_id,
                reason,
            }),
        }
    }
    Ok((
        ReportAnswer {
            kind: Kind::Report,
            request_id: report.envelope.id.clone(),
            accepted,
            ignored,
        },
        rate_limited,
    ))
}

/// One result: `Ok(Err(reason))` when it is ignored.
fn apply_result(
    tx: &Tx<'_>,
    settings: &Settings,
    result: &CommandResult,
    now: &Now,
    ingested: &mut Ingested,
    mapped: Option<Vec<Mapped>>,
) -> Result<std::result::Result<(), String>> {
    let Some(command) = tx.command(result.command_id)? else {
        return Ok(Err(format!("команды {} нет", result.command_id)));
    };
    if command.status.is_terminal() {
        return Ok(Err(format!(
            "команда уже в конечном статусе «{}»; повторный или поздний отчёт ничего не меняет",
            command.status.label()
        )));
    }
    if result.delivery == 0 || result.delivery > command.deliveries {
        return Ok(Err(format!(
            "выдачи {} у этой команды не было (выдана {})",
            result.delivery,
            crate::domain::words::count(
                u64::from(command.deliveries),
                &crate::domain::words::TIMES
            )
        )));
    }
    if let Some(retried_after) = tx.deliveries_before_retry(command.id)?
        && result.delivery <= retried_after
    {
        return Ok(Err(format!(
            "выдача {} относится к прежней попытке, которая закончилась до повтора команды",
            result.delivery
        )));
    }
    let is_refresh = command.command_type == CommandType::Refresh;
    // An ignored result changes nothing: the checks come before any write.
    if result.status == ResultStatus::Progress {
        if result.page.is_none() {
            return keep_alive(tx, &command, result, now);
        }
        if !is_refresh {
            return Ok(Err("page бывает только у команды refresh".into()));
        }
    }
    // Only the delivery in hand can be given back: an older one's command may be out again.
    if result.status == ResultStatus::Released
        && (command.status != CommandStatus::Claimed || result.delivery != command.deliveries)
    {
        return Ok(Err(format!(
            "выдача {} уже не текущая (команда {}, выдана {} раз): вернуть её нельзя",
            result.delivery,
            command.status.as_str(),
            command.deliveries
        )));
    }
    tx.add_jira_counts(command.id, result.jira_calls, result.rate_limited)?;
    // Stored as the report's text: a result never becomes a tree of values but a refresh's
    // (`{total, boards}`), read for its boards.
    let found = result.result.as_ref().map(crate::protocol::RawJson::get);
    // The agent's clock is only shown; the hub's own time is what `finished_at` records.
    let agent_finished_at = result
        .finished_at
        .as_deref()
        .and_then(parse_utc)
        .map(Utc::new);
    match result.status {
        ResultStatus::Progress => {
            let Some(page) = &result.page else {
                return Ok(Err("у progress нет page".into()));
            };
            tx.renew_lease(command.id, &now.utc)?;
            ingest_page(tx, settings, &command, page, mapped, now, ingested)?;
        }
        ResultStatus::Done => {
            if is_refresh {
                if let Some(page) = &result.page {
                    ingest_page(tx, settings, &command, page, mapped, now, ingested)?;
                }
                let found = result.result.as_ref().map(crate::protocol::RawJson::value);
                complete_refresh(tx, settings, &command, found.as_ref(), now)?;
            }
            let finish = Finish {
                status: CommandStatus::Done,
                finished_at: &now.utc,
                result: Some(found.unwrap_or("null")),
                error: None,
                agent_finished_at: agent_finished_at.as_ref(),
            };
            tx.finish_command(command.id, &finish)?;
        }
        ResultStatus::Released => {
            release(tx, settings, &command, result, now)?;
        }
        ResultStatus::Failed | ResultStatus::Skipped => {
            let status = if result.status == ResultStatus::Failed {
                CommandStatus::Failed
            } else {
                CommandStatus::Skipped
            };
            let error = truncate_error(
                result
                    .error
                    .as_deref()
                    .unwrap_or("агент не сообщил причину"),
            );
            if is_refresh && let Some(run) = tx.open_run(command.id)? {
                tx.finish_run(run.id, RunStatus::Failed, &now.utc, Some(&error))?;
            }
            let finish = Finish {
                status,
                finished_at: &now.utc,
                result: found,
                error: Some(&error),
                agent_finished_at: agent_finished_at.as_ref(),
            };
            tx.finish_command(command.id, &finish)?;
            skip_dependents(tx, &command, status, now)?;
        }
    }
    Ok(Ok(()))
}

/// When the earlier deliveries of a command about to be handed out ended at the latest: the
/// previous delivery's last sign of life (`lease_at`: its claim, keep-alive or give-back), or,
/// after a retry (which clears it), when the attempt before ended. `None` on a first delivery.
pub(super) fn earlier_ended(tx: &Tx<'_>, command: &CommandRow) -> Result<Option<Utc>> {
    if command.deliveries == 0 {
        return Ok(None);
    }
    if let Some(at) = &command.lease_at {
        return Ok(Some(at.clone()));
    }
    Ok(tx.attempts_of(command.id)?.pop().and_then(|attempt| {
        attempt
            .finished_at
            .or(attempt.agent_finished_at)
            .or(attempt.claimed_at)
    }))
}

/// Whether the mirror proves that the command's effect is in Jira; the result to record if so.
/// Proof, never likeness:
///
/// - a create or a comment is never confirmed here: the mirror does not hold the marker that
///   names the command's issue or comment (search answers carry no entity properties on Data
///   Center, JRASERVER-62898), and an issue or comment that merely looks the same may be another
///   command's result or a person's (twin creates in one batch; a recurring comment text). The
///   command goes back to the queue and its next delivery decides by the marker, which it reads
///   in Jira before it writes;
/// - a transition is confirmed only when the issue's status *id* is the target's and the mirror's
///   row was read by a refresh that started after the command's delivery (a stale row proves
///   nothing; a status name is not unique, and the legacy `transitions_map` form names no status
///   id, so it is never confirmed here);
/// - a link is confirmed when the mirror holds it (Jira makes one link per (type, inward,
///   outward), whoever asked for it) and an edit (`ensure_issue` with a key) when the issue shows
///   every requested field (setting a field twice is harmless), each only from a row a refresh
///   read after the command's delivery, like a transition (a mirror read
///   before proves nothing about this delivery).
pub(super) fn confirm_by_state(
    tx: &Tx<'_>,
    settings: &Settings,
    command: &CommandRow,
) -> Result<Option<Value>> {
    let params = match command.depends_on {
        None => command.params.clone(),
        Some(dependency_id) => {
            let dependency = tx.command(dependency_id)?;
            match substitute_result(
                &command.params,
                dependency.as_ref().and_then(|d| d.result.as_ref()),
            ) {
                Ok(params) => params,
                Err(_) => return Ok(None),
            }
        }
    };
    let text = |name: &str| params.get(name).and_then(Value::as_str).map(String::from);
    Ok(match command.command_type {
        CommandType::Refresh | CommandType::Comment => None,
        CommandType::Transition => {
            let (Some(key), Some(status), Some(claimed_at)) =
                (text("key"), text("status"), command.claimed_at.as_ref())
            else {
                return Ok(None);
            };
            let Some(TransitionTarget::Status { status_id, .. }) =
                settings.transitions_map.get(&status)
            else {
                return Ok(None);
            };
            let mirrored_id =
                tx.issue_fields(&key)?
                    .and_then(|fields| match &fields["status"]["id"] {
                        Value::String(id) => Some(id.clone()),
                        Value::Number(id) => Some(id.to_string()),
                        _ => None,
                    });
            (mirrored_id.as_deref() == Some(status_id.as_str())
                && tx.issue_read_after(&key, claimed_at)?)
            .then(|| json!({"status": status}))
        }
        CommandType::Link => {
            let (Some(from), Some(to), Some(link_type), Some(claimed_at)) = (
                text("from"),
                text("to"),
                text("type"),
                command.claimed_at.as_ref(),
            ) else {
                return Ok(None);
            };
            let Some(jira_name) = settings.link_types.get(&link_type) else {
                return Ok(None);
            };
            // The links are the inward issue's: its row must have been read after the delivery.
            (tx.link_exists(&from, &to, jira_name)? && tx.issue_read_after(&from, claimed_at)?)
                .then(|| json!({"link_id": null}))
        }
        CommandType::EnsureIssue => match command.claimed_at.as_ref() {
            Some(claimed_at) => confirm_edit(tx, settings, &params, claimed_at)?,
            None => None,
        },
    })
}

/// An edit (`ensure_issue` with a key) is visible when the issue shows every requested field. A
/// create (no key) is never confirmed from the mirror: see [`confirm_by_state`].
fn confirm_edit(
    tx: &Tx<'_>,
    settings: &Settings,
    params: &Value,
    claimed_at: &Utc,
) -> Result<Option<Value>> {
    let text = |name: &str| params.get(name).and_then(Value::as_str);
    let Some(key) = params
        .get("key")
        .filter(|k| !k.is_null() && !is_result_reference(k))
    else {
        return Ok(None);
    };
    let Some(key) = key.as_str() else {
        return Ok(None);
    };
    if !tx.issue_read_after(key, claimed_at)? {
        return Ok(None);
    }
    let Some(type_name) = text("issue_type")
        .and_then(|t| settings.issue_types.as_ref()?.get(t))
        .map(|t| t.name.clone())
    else {
        return Ok(None);
    };
    let labels: Vec<&str> = params
        .get("labels")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let matches = |issue: &MirrorFields| -> bool {
        let field_ok = |name: &str, actual: Option<&str>| {
            text(name).is_none_or(|wanted| Some(wanted) == actual)
        };
        issue.issue_type == type_name
            && text("summary").is_none_or(|s| s.trim() == issue.summary)
            && field_ok("description", issue.description.as_deref())
            && field_ok("assignee", issue.assignee.as_deref())
            && field_ok("duedate", issue.duedate.as_deref())
            && field_ok("plan_start", issue.plan_start.as_deref())
            && field_ok("plan_end", issue.plan_end.as_deref())
            && field_ok("epic_key", issue.epic_key.as_deref())
            && field_ok("sprint", issue.sprint.as_deref())
            && text("priority").is_none_or(|p| {
                settings.priority_map.get(p).map(String::as_str) == issue.priority.as_deref()
            })
            && labels
                .iter()
                .all(|l| issue.labels.iter().any(|have| have == l))
    };
    Ok(tx
        .issue(key)?
        .filter(|issue| matches(&issue.mirrored))
        .map(|_| json!({"key": key, "created": false})))
}
