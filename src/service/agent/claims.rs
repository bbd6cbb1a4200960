//! Claims: walking the queue for the next commands an agent may run, withholding what waits on
//! another, the claim's answer, and a run started for each command handed out.

use super::Now;
use super::leases::expire_in;
use super::runs::{
    dependency_failed, earlier_ended, lease_over, lease_timeout, skip_dependents, start_run,
};
use crate::domain::command::{CommandStatus, CommandType, backoff_pause, substitute_result};
use crate::domain::settings::Settings;
use crate::protocol::{
    AgentAnswer, ClaimAnswer, ClaimRequest, ClaimedCommand, Kind, Peer, PreviousRelease,
};
use crate::service::Result;
use crate::service::batches::settings_in;
use crate::store::{CommandRow, Finish, StoreError, Tx};
use serde_json::Value;

/// A queued command the claim may hand out, with its parameters (a dependency's result put in).
type Ready = (CommandRow, Value);
/// A queued command that can never run (its dependency is missing or did not succeed): ended
/// with this status and reason by the claim that finds it.
type Blocked = (CommandRow, CommandStatus, String);
/// A queued command the claiming agent cannot honour, and whether it already says it waits.
type Withheld = (i64, bool);

/// What the words «ждёт агента, который проверяет конфликты» say: an edit with a base waits for
/// an agent that checks bases (`edit_base`).
pub const WAITS_FOR_BASE_CHECK: &str = "ждёт агента, который проверяет конфликты";

/// Why `agent` may not run `command`, when it may not: an edit with a base goes only to an agent
/// that checks bases, since one that does not (the previous release) writes over whatever a
/// person changed in Jira. An edit whose every checked field the operator chose to overwrite
/// («Записать поверх») checks nothing, and goes to any agent. Everything else every release
/// runs as this one does: refresh, create, transition, link, comment, and edits without a base.
pub(crate) fn withheld_from(command: &CommandRow, agent: &Peer) -> Option<&'static str> {
    if command.command_type != CommandType::EnsureIssue
        || agent.can(crate::protocol::CAP_EDIT_BASE)
        || !crate::domain::edit::has_base(&command.params)
    {
        return None;
    }
    let overwritten: Vec<&str> = command.params["overwrite"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let checked = command.params["base"]["fields"]
        .as_object()
        .into_iter()
        .flatten()
        .any(|(field, _)| !overwritten.contains(&field.as_str()));
    checked.then_some(WAITS_FOR_BASE_CHECK)
}

/// Walks the queue in order: the commands a claim may hand out now (at most `limit`), and those
/// it finds blocked on the way. Reads only.
///
/// A command `agent` cannot honour ([`withheld_from`]) is passed over, and the later commands of
/// its batch wait with it (a batch's commands reach Jira in their order).
fn walk_queue(
    tx: &Tx<'_>,
    now: &Now,
    limit: usize,
    agent: &Peer,
) -> Result<(Vec<Ready>, Vec<Blocked>, Vec<Withheld>)> {
    let mut ready: Vec<Ready> = Vec::new();
    let mut blocked: Vec<Blocked> = Vec::new();
    let mut withheld: Vec<Withheld> = Vec::new();
    if limit == 0 {
        return Ok((ready, blocked, withheld));
    }
    // Batches with a command given back and waiting out its grace: their later commands wait
    // too, so that a batch's commands reach Jira in their order.
    let mut waiting_batches: Vec<i64> = Vec::new();
    tx.visit_queued(|command| {
        if waiting_batches.contains(&command.batch_id) {
            return Ok(true);
        }
        // Given back by its agent (`released`): not before its grace ends.
        if command.not_before.as_ref().is_some_and(|t| t.at() > now.at) {
            waiting_batches.push(command.batch_id);
            return Ok(true);
        }
        if let Some(why) = withheld_from(&command, agent) {
            withheld.push((command.id, command.withheld.as_deref() == Some(why)));
            waiting_batches.push(command.batch_id);
            return Ok(true);
        }
        let params = match command.depends_on {
            None => command.params.clone(),
            Some(dependency_id) => {
                let Some(dependency) = tx.command(dependency_id)? else {
                    let reason = format!("команды {dependency_id}, от которой зависит эта, нет");
                    blocked.push((command, CommandStatus::Failed, reason));
                    return Ok(true);
                };
                if !dependency.status.is_terminal() {
                    return Ok(true);
                }
                if !dependency.status.satisfies_dependency() {
                    let reason = dependency_failed(&dependency);
                    blocked.push((command, CommandStatus::Skipped, reason));
                    return Ok(true);
                }
                match substitute_result(&command.params, dependency.result.as_ref()) {
                    Ok(params) => params,
                    Err(reason) => {
                        blocked.push((command, CommandStatus::Failed, reason));
                        return Ok(true);
                    }
                }
            }
        };
        ready.push((command, params));
        Ok(ready.len() < limit)
    })?;
    Ok((ready, blocked, withheld))
}

/// `freed`: set when the claim's own sweep returned commands to the queue.
pub(super) fn claim_in(
    tx: &Tx<'_>,
    claim: &ClaimRequest,
    now: &Now,
    streak: u32,
    freed: &mut bool,
) -> Result<ClaimAnswer> {
    let settings = settings_in(tx)?;
    *freed |= expire_in(tx, &settings, now)?.requeued > 0;
    let limit = claim
        .max_commands
        .min(settings.pacing.max_commands_per_claim) as usize;
    let pause = backoff_pause(&settings.pacing, streak);

    // Read first, write after: the queue is not modified while it is being walked.
    let (ready, blocked, withheld) = walk_queue(tx, now, limit, &claim.peer)?;
    for (id, _) in withheld.iter().filter(|(_, marked)| !marked) {
        tx.set_withheld(*id, Some(WAITS_FOR_BASE_CHECK))?;
        tracing::warn!(agent = %claim.envelope.agent, command = id, protocol = claim.peer.revision(), "an edit with a base is not handed to an agent that does not check bases: it waits for one that does");
    }
    for (command, status, reason) in blocked {
        let finish = Finish {
            status,
            finished_at: &now.utc,
            result: None,
            error: Some(&reason),
            agent_finished_at: None,
        };
        tx.finish_command(command.id, &finish)?;
        skip_dependents(tx, &command, status, now)?;
    }
    let mut commands = Vec::with_capacity(ready.len());
    for (command, params) in ready {
        // How long ago its previous delivery was given back, when it was (`released`).
        let released_seconds_ago = command
            .not_before
            .as_ref()
            .and(command.lease_at.as_ref())
            .map(|at| (now.at - at.at()).whole_seconds().max(0) as u64);
        let previous_release = previous_release(&command);
        let earlier_ended_seconds_ago =
            earlier_ended(tx, &command)?.map(|at| (now.at - at.at()).whole_seconds().max(0) as u64);
        super::leases::restart_age_after_wait(tx, &settings, &command, now)?;
        tx.mark_claimed(command.id, &now.utc, &claim.envelope.agent, pause)?;
        // The agent looks for an issue a lost create may have made no earlier than this.
        let enqueued_at = tx
            .batch(command.batch_id)?
            .map(|batch| batch.created_at.to_string());
        if command.command_type == CommandType::Refresh && tx.open_run(command.id)?.is_none() {
            start_run(tx, &settings, &command, now)?;
        }
        commands.push(ClaimedCommand {
            id: command.id,
            batch_id: command.batch_id,
            seq: command.seq,
            command_type: command.command_type.as_str().to_string(),
            params,
            delivery: command.deliveries + 1,
            enqueued_at,
            released_seconds_ago,
            previous_release,
            earlier_ended_seconds_ago,
        });
    }
    if !commands.is_empty() {
        tracing::info!(agent = %claim.envelope.agent, commands = commands.len(), pause, "commands claimed");
    }
    Ok(claim_answer(claim, &settings, now, pause, commands))
}

/// The command's previous delivery, when it ended in a give-back (`not_before` is set by a
/// release and cleared by a claim): its reason, and the path refused when that was why.
fn previous_release(command: &CommandRow) -> Option<PreviousRelease> {
    command.not_before.as_ref()?;
    Some(PreviousRelease {
        reason: command.error.clone().unwrap_or_default(),
        refused: command
            .released_refusal
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok()),
    })
}

fn claim_answer(
    claim: &ClaimRequest,
    settings: &Settings,
    now: &Now,
    pause: u32,
    commands: Vec<ClaimedCommand>,
) -> ClaimAnswer {
    // A differing version, older or (after a restore of the database) newer, gets the settings.
    let settings_outdated = claim.settings_version != settings.settings_version;
    ClaimAnswer {
        kind: Kind::Claim,
        request_id: claim.envelope.id.clone(),
        created_at: now.text().to_string(),
        settings_version: settings.settings_version,
        settings: settings_outdated.then(|| settings.agent_view()),
        pause_seconds: pause,
        commands,
        // The transport that answers sets its own limit.
        max_report_bytes: None,
        lease_seconds: Some(settings.pacing.claim_timeout_seconds),
        hub: Box::new(Peer::this_hub()),
    }
}

/// What a read-only look at a claim found.
pub(super) enum ClaimLook {
    /// Its id was handled: the recorded answer.
    Replay(AgentAnswer),
    /// It would hand out nothing, end nothing and carry nothing; with whether the queue was
    /// walked (a claim of `max_commands` 0 walks nothing, and tells nothing of what other
    /// claims may take).
    Idle(bool),
    /// It has something to do (a command to hand out or end, a lease over, settings or a pause
    /// to carry): the write transaction decides.
    Work,
}

/// Looks at a claim without writing: a waiting claim, and an idle agent's claim, cost a read.
pub(super) fn look_at_claim(
    tx: &Tx<'_>,
    claim: &ClaimRequest,
    now: &Now,
    streak: u32,
) -> Result<ClaimLook> {
    if let Some(stored) = tx.handled_request(Kind::Claim.as_str(), &claim.envelope.id)? {
        let answer = serde_json::from_str(&stored).map_err(StoreError::from)?;
        return Ok(ClaimLook::Replay(answer));
    }
    let settings = settings_in(tx)?;
    let pause = backoff_pause(&settings.pacing, streak);
    if claim.settings_version != settings.settings_version || pause > 0 {
        return Ok(ClaimLook::Work);
    }
    let timeout = lease_timeout(&settings);
    if tx
        .claimed_commands()?
        .iter()
        .any(|command| lease_over(command, timeout, now))
    {
        return Ok(ClaimLook::Work);
    }
    let limit = claim
        .max_commands
        .min(settings.pacing.max_commands_per_claim) as usize;
    let (ready, blocked, withheld) = walk_queue(tx, now, limit.min(1), &claim.peer)?;
    // A command passed over that does not say so yet: the write transaction marks it.
    if !ready.is_empty() || !blocked.is_empty() || withheld.iter().any(|(_, marked)| !marked) {
        return Ok(ClaimLook::Work);
    }
    Ok(ClaimLook::Idle(limit > 0))
}
