//! Give-backs and leases: a command released with its grace and budget, the heartbeat that
//! keeps a claim alive, and claims whose lease ran out.

use super::runs::{lease_over, lease_timeout, skip_dependents};
use super::{ExpiredClaims, Now};
use crate::domain::command::{
    CommandStatus, CommandType, RunStatus, is_result_reference, substitute_result, truncate_error,
};
use crate::domain::issue::MirrorFields;
use crate::domain::settings::{Settings, TransitionTarget};
use crate::domain::time::Utc;
use crate::protocol::{CommandResult, HeartbeatAnswer, HeartbeatRequest, Kind};
use crate::service::Result;
use crate::store::{CommandRow, Finish, GiveBack, Tx};
use serde_json::{Value, json};

/// A command its agent gave back (`released`): queued again with its delivery count,
/// not handed out before the grace the agent asked for; `failed` instead once it has had
/// `max_deliveries` deliveries. A refresh's open run fails (the next delivery starts another).
pub(super) fn release(
    tx: &Tx<'_>,
    settings: &Settings,
    command: &CommandRow,
    result: &CommandResult,
    now: &Now,
) -> Result<()> {
    let reason = truncate_error(
        result
            .error
            .as_deref()
            .unwrap_or("агент вернул команду без причины"),
    );
    if let Some(run) = tx.open_run(command.id)? {
        tx.finish_run(run.id, RunStatus::Failed, &now.utc, Some(&reason))?;
    }
    // The user cancelled its batch meanwhile: not sent to Jira again. A create or
    // comment it may have made shows in the command's view with its marker.
    if tx
        .batch(command.batch_id)?
        .is_some_and(|batch| batch.cancelled_at.is_some())
    {
        let error = format!("{reason}; пакет отменён, команда больше не выдаётся");
        return end_unreported(tx, command, CommandStatus::Cancelled, &error, now);
    }
    // `sent: false`: nothing of this delivery reached Jira (the agent found it
    // held, or never started the command), so it is not counted and cannot use up the
    // command's deliveries. Without a single Jira call either (given back with the rest of a
    // claim, or while the agent is held) it says nothing about the command: no budget at all.
    let give_back = match (result.sent, result.jira_calls) {
        (Some(false), 0) => GiveBack::Unstarted,
        (Some(false), _) => GiveBack::Uncounted,
        _ => GiveBack::Counted,
    };
    let counted = give_back == GiveBack::Counted;
    if give_back == GiveBack::Uncounted
        && let Some(spent) = uncounted_budget_spent(command, now)
    {
        let error = format!("{reason}; {spent}");
        tracing::warn!(command = command.id, %error, "uncounted give-backs over budget: the command fails");
        return end_unreported(tx, command, CommandStatus::Failed, &error, now);
    }
    if counted && command.deliveries >= settings.pacing.max_deliveries {
        let error = format!(
            "{reason}; агент вернул команду после {} выдач из {}",
            command.deliveries, settings.pacing.max_deliveries
        );
        return end_unreported(tx, command, CommandStatus::Failed, &error, now);
    }
    let grace = result
        .not_before_seconds
        .unwrap_or(1)
        .min(max_grace(settings, command.command_type));
    let not_before = Utc::new(now.at + time::Duration::seconds(i64::from(grace)));
    // The one path refused, handed to the next delivery; any other reason
    // clears it, so only the same refusal twice in a row fails the command.
    let refusal = result
        .refused
        .as_ref()
        .and_then(|refused| serde_json::to_string(refused).ok());
    tx.release_command(
        command.id,
        &now.utc,
        &not_before,
        &reason,
        give_back,
        refusal.as_deref(),
    )?;
    tracing::info!(
        command = command.id,
        grace,
        give_back = ?give_back,
        reason = %reason,
        "the agent gave a command back: queued again after its grace"
    );
    Ok(())
}

/// How many times in a row a command may be given back with nothing sent to Jira after calling
/// it (`released`, `sent: false`, `jira_calls` > 0) before the hub fails it with the last reason.
/// Give-backs without a Jira call (`jira_calls: 0`) are not in the run.
pub const MAX_UNCOUNTED_RELEASES: u32 = 20;
/// How long a run of uncounted give-backs may last, from its first, before the hub fails the
/// command the same way. The age runs over consecutive give-backs of a command being run: one
/// counted delivery ends the run (count and age), and the age (not the count) starts afresh
/// after a stretch in which the command was not run: a give-back without a Jira call, or a wait
/// in the queue of more than a lease past its grace (the agent down, held, or busy with other
/// work; see [`restart_age_after_wait`]).
pub(crate) const MAX_UNCOUNTED_AGE: time::Duration = time::Duration::hours(1);

/// At a claim: when `command` is in a run of uncounted give-backs and was handed out more than a
/// lease after its grace ended, the run's age starts afresh (its count stays, so a command given
/// back as often as it is handed out still fails within [`MAX_UNCOUNTED_RELEASES`]).
pub(super) fn restart_age_after_wait(
    tx: &Tx<'_>,
    settings: &Settings,
    command: &CommandRow,
    now: &Now,
) -> Result<()> {
    let (Some(_), Some(due)) = (&command.uncounted_since, &command.not_before) else {
        return Ok(());
    };
    let lease = time::Duration::seconds(i64::from(settings.pacing.claim_timeout_seconds));
    if now.at - due.at() > lease {
        tx.restart_uncounted_age(command.id)?;
    }
    Ok(())
}

/// Whether one more uncounted give-back of `command` passes its budget: the words of why, then.
/// A give-back with nothing sent spends no delivery, so without this an agent that cannot run a
/// command (one path refused, a pacing that does not fit the lease, a wrong `sent: false`)
/// would hand it back forever, its batch never moving.
fn uncounted_budget_spent(command: &CommandRow, now: &Now) -> Option<String> {
    let count = command.uncounted_releases + 1;
    let age = command
        .uncounted_since
        .as_ref()
        .map_or(time::Duration::ZERO, |since| now.at - since.at());
    if count < MAX_UNCOUNTED_RELEASES && age < MAX_UNCOUNTED_AGE {
        return None;
    }
    Some(format!(
        "агент возвращал команду, ничего не отправив в Jira, {} подряд за {} мин (предел: {} раз или {} мин), хаб больше её не выдаёт",
        crate::domain::words::count(u64::from(count), &crate::domain::words::TIMES),
        age.whole_minutes(),
        MAX_UNCOUNTED_RELEASES,
        MAX_UNCOUNTED_AGE.whole_minutes()
    ))
}

/// The longest grace an agent may ask for a command it gives back, per type: a
/// write's answer lost may keep it back up to [`crate::protocol::MAX_NOT_BEFORE_SECONDS`] (the
/// write may still run in Jira); a refresh writes nothing, so it never waits longer than a
/// lapsed lease would (`claim_timeout_seconds`).
fn max_grace(settings: &Settings, command_type: CommandType) -> u32 {
    match command_type {
        CommandType::Refresh => settings
            .pacing
            .claim_timeout_seconds
            .min(crate::protocol::MAX_NOT_BEFORE_SECONDS),
        _ => crate::protocol::MAX_NOT_BEFORE_SECONDS,
    }
}

/// A `progress` without `page`: the agent still works on the command (a long wait for Jira), so
/// its lease is renewed, and nothing else changes (counts included; a refresh's run too). Only
/// the current delivery keeps a lease: an older one's agent has lost it, and the answer tells it
/// so (it stops working on the command).
pub(super) fn keep_alive(
    tx: &Tx<'_>,
    command: &CommandRow,
    result: &CommandResult,
    now: &Now,
) -> Result<std::result::Result<(), String>> {
    if result.delivery != command.deliveries {
        return Ok(Err(format!(
            "аренда выдачи {} потеряна: команда выдана снова (выдача {})",
            result.delivery, command.deliveries
        )));
    }
    if command.status != CommandStatus::Claimed {
        return Ok(Err(format!(
            "аренда потеряна: команда в статусе {}",
            command.status.as_str()
        )));
    }
    tx.renew_lease(command.id, &now.utc)?;
    Ok(Ok(()))
}

pub(super) fn heartbeat_answer(heartbeat: &HeartbeatRequest) -> HeartbeatAnswer {
    HeartbeatAnswer {
        kind: Kind::Heartbeat,
        request_id: heartbeat.envelope.id.clone(),
    }
}

/// Ends a claimed command whose report never came: its open run fails, the command takes
/// `status` with `error`, its dependents are skipped.
fn end_unreported(
    tx: &Tx<'_>,
    command: &CommandRow,
    status: CommandStatus,
    error: &str,
    now: &Now,
) -> Result<()> {
    if let Some(run) = tx.open_run(command.id)? {
        tx.finish_run(run.id, RunStatus::Failed, &now.utc, Some(error))?;
    }
    let finish = Finish {
        status,
        finished_at: &now.utc,
        result: None,
        error: Some(error),
        agent_finished_at: None,
    };
    tx.finish_command(command.id, &finish)?;
    skip_dependents(tx, command, status, now)
}

pub(super) fn expire_in(tx: &Tx<'_>, settings: &Settings, now: &Now) -> Result<ExpiredClaims> {
    let timeout = lease_timeout(settings);
    let mut expired = ExpiredClaims::default();
    for command in tx.claimed_commands()? {
        if !lease_over(&command, timeout, now) {
            continue;
        }
        let cancelled = tx
            .batch(command.batch_id)?
            .is_some_and(|batch| batch.cancelled_at.is_some());
        if let Some(result) = confirm_by_state(tx, settings, &command)? {
            let result = result.to_string();
            let finish = Finish {
                status: CommandStatus::ConfirmedByState,
                finished_at: &now.utc,
                result: Some(&result),
                error: None,
                agent_finished_at: None,
            };
            tx.finish_command(command.id, &finish)?;
            expired.confirmed_by_state += 1;
        } else if cancelled {
            // The user cancelled the batch: a delivery that never reported is not sent to Jira
            // again. Its dependents were cancelled with the batch.
            let error = format!(
                "пакет отменён; агент не отчитался за {} с о выдаче {}",
                settings.pacing.claim_timeout_seconds, command.deliveries
            );
            end_unreported(tx, &command, CommandStatus::Cancelled, &error, now)?;
            expired.cancelled += 1;
        } else if command.deliveries >= settings.pacing.max_deliveries {
            let error = format!(
                "агент не отчитался за {} с после {} выдач",
                settings.pacing.claim_timeout_seconds, command.deliveries
            );
            end_unreported(tx, &command, CommandStatus::Failed, &error, now)?;
            expired.failed += 1;
        } else {
            tx.requeue(command.id)?;
            expired.requeued += 1;
        }
    }
    Ok(expired)
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
