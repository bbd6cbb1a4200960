//! A command's runs and leases as claims, reports and expiry all see them: a run started or
//! found, dependents skipped after a command that failed them, when a lease is over, when the
//! earlier deliveries ended.

use super::Now;
use crate::domain::command::{CommandStatus, RunKind};
use crate::domain::jql::split_incremental;
use crate::domain::settings::Settings;
use crate::domain::time::Utc;
use crate::service::Result;
use crate::service::batches::{base_jql_in, settings_in};
use crate::store::{CommandRow, Finish, Tx};
use serde_json::Value;

/// The open run of a refresh command, started now if its first sign of life is a page or its
/// result (a claim normally starts it).
pub(super) fn run_of(tx: &Tx<'_>, command: &CommandRow, now: &Now) -> Result<crate::store::RunRow> {
    if let Some(run) = tx.open_run(command.id)? {
        return Ok(run);
    }
    start_run(tx, &settings_in(tx)?, command, now)
}

/// Opens the run of a refresh command, recording whether it is full: its query is the base JQL
/// at this moment.
pub(super) fn start_run(
    tx: &Tx<'_>,
    settings: &Settings,
    command: &CommandRow,
    now: &Now,
) -> Result<crate::store::RunRow> {
    let query = command
        .params
        .get("jql")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let base = base_jql_in(tx, settings)?;
    let (kind, scope) = match split_incremental(query) {
        Some((scope, _)) => (RunKind::Incremental, scope),
        None if base.as_deref() == Some(query) => (RunKind::Full, query),
        None => (RunKind::Partial, query),
    };
    Ok(tx.start_run(command.id, query, kind, scope, &now.utc)?)
}

pub(super) fn dependency_failed(dependency: &CommandRow) -> String {
    format!(
        "Команда {} этого пакета, от которой зависит эта, завершилась со статусом «{}»",
        dependency.seq,
        dependency.status.label()
    )
}

/// A command that ended without satisfying its dependents: they (and theirs) are skipped.
/// Walked with a work list, not recursion: a chain of 10,000 commands (a batch's limit) is as
/// deep as it is long, and the caller's transaction holds every change.
pub(super) fn skip_dependents(
    tx: &Tx<'_>,
    command: &CommandRow,
    status: CommandStatus,
    now: &Now,
) -> Result<()> {
    let mut ended = vec![CommandRow {
        status,
        ..command.clone()
    }];
    while let Some(dependency) = ended.pop() {
        let reason = dependency_failed(&dependency);
        for dependent in tx.dependents(dependency.id)? {
            if dependent.status.is_terminal() {
                continue;
            }
            let finish = Finish {
                status: CommandStatus::Skipped,
                finished_at: &now.utc,
                result: None,
                error: Some(&reason),
                agent_finished_at: None,
            };
            tx.finish_command(dependent.id, &finish)?;
            ended.push(CommandRow {
                status: CommandStatus::Skipped,
                ..dependent
            });
        }
    }
    Ok(())
}

pub(super) fn lease_timeout(settings: &Settings) -> time::Duration {
    time::Duration::seconds(i64::from(settings.pacing.claim_timeout_seconds))
}

/// Whether a claimed command's lease (from its last sign of life, or its claim) is over.
pub(super) fn lease_over(command: &CommandRow, timeout: time::Duration, now: &Now) -> bool {
    let lease = command
        .lease_at
        .as_ref()
        .or(command.claimed_at.as_ref())
        .map(Utc::at);
    lease.is_none_or(|at| at + timeout <= now.at)
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
