//! Reports: each command's result applied (done, failed, released, conflict), a run ended once,
//! and what Jira's state confirms of a result that was lost.

use super::Now;
use super::leases::{keep_alive, release};
use super::refresh::{Ingested, Mapped, Premapped, complete_refresh, ingest_page};
use super::runs::skip_dependents;
use crate::domain::command::{CommandStatus, CommandType, RunStatus, truncate_error};
use crate::domain::settings::Settings;
use crate::domain::time::{Utc, parse_utc};
use crate::protocol::{CommandResult, Ignored, Kind, ReportAnswer, ReportRequest, ResultStatus};
use crate::service::Result;
use crate::service::batches::settings_in;
use crate::store::{Finish, Tx};

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
