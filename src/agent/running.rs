//! One command run: executed against Jira while its lease is kept alive by heartbeats, its
//! refresh pages reported to the hub as they come, its result reported once.

use super::Agent;
use super::HELD_NOT_BEFORE;
use super::commands::{Executor, Outcome};
use super::give_back::{MAX_GIVE_BACK_WAIT, given_back, safety_margin};
use super::jira_api::JiraError;
use super::transport::{HubLink, LinkError};
use super::wait::{self};
use super::{answer, jira_api};
use crate::protocol::{ClaimedCommand, CommandResult, Page, RawJson, ResultStatus};
use std::sync::{Arc, Mutex};
use std::time::Duration;

impl Agent {
    /// Runs one command and reports it; `Some((reason, held, not_before))` when it went back to
    /// the hub unfinished instead (reported `released` already).
    pub(super) fn execute(
        &mut self,
        command: &ClaimedCommand,
    ) -> Option<(String, Option<answer::Cause>, Duration)> {
        tracing::info!(command = command.id, r#type = %command.command_type, delivery = command.delivery, "executing");
        self.jira.take_counters();
        self.jira.take_release_for();
        self.refused = None;
        let hub = &*self.hub;
        let max_report_bytes = self.max_report_bytes;
        let mut start_at = 0u64;
        // A refresh's pages go to the hub from a thread of their own while the next page is read
        // from Jira: the two waits overlap instead of adding up. At most one page waits in the
        // channel and one is on its way, so memory stays a few pages whatever the result set.
        let failure: std::sync::Mutex<Option<JiraError>> = std::sync::Mutex::new(None);
        let fail = |error: JiraError| {
            if let Ok(mut slot) = failure.lock() {
                slot.get_or_insert(error);
            }
        };
        let outcome = std::thread::scope(|scope| {
            let (pages, queued) = std::sync::mpsc::sync_channel::<CommandResult>(1);
            let reporter = scope.spawn(|| {
                for result in queued {
                    match report_page(hub, result, max_report_bytes) {
                        Ok(Some(reason)) => {
                            fail(JiraError::Unavailable(format!(
                                "хаб больше не принимает этот refresh: {reason}"
                            )));
                            return;
                        }
                        Ok(None) => {}
                        Err(LinkError::Stopped) => {
                            fail(JiraError::Stopped);
                            return;
                        }
                        Err(error) => {
                            fail(JiraError::Unavailable(error.to_string()));
                            return;
                        }
                    }
                }
            });
            let jira = &mut self.jira;
            // Pages are reported through the hub as they come, each with the calls made so far.
            let counters = jira.counters_handle();
            let waits = self.waits.clone();
            let sleep = move |wait: Duration| waits.sleep(wait);
            let mut executor = Executor {
                jira,
                settings: &self.settings,
                page_size: self.page_size,
                search_lag: self.search_lag,
                agent: &self.name,
                write_limit: self.request_timeout,
                grace: self.release_grace,
                claimed: self
                    .claimed
                    .as_ref()
                    .map(|(created_at, at)| (created_at.as_str(), *at)),
                sleep: &sleep,
            };
            let taken = || failure.lock().ok().and_then(|mut slot| slot.take());
            let mut on_page = |page: jira_api::SearchPage| -> Result<(), JiraError> {
                if let Some(error) = taken() {
                    return Err(error);
                }
                let count = page.issues.len() as u64;
                let spent = counters.take();
                let result = CommandResult {
                    command_id: command.id,
                    delivery: command.delivery,
                    status: ResultStatus::Progress,
                    result: None,
                    error: None,
                    jira_calls: spent.calls,
                    rate_limited: spent.rate_limited,
                    finished_at: None,
                    page: Some(Page {
                        start_at,
                        total: page.total,
                        issues: page.issues.into_iter().map(RawJson::from).collect(),
                    }),
                    not_before_seconds: None,
                    sent: None,
                    refused: None,
                };
                if pages.send(result).is_err() {
                    // The reporter stopped: its reason is in `failure`.
                    return Err(taken().unwrap_or(JiraError::Stopped));
                }
                start_at += count;
                Ok(())
            };
            let outcome = executor.execute(command, &mut on_page);
            // Every page reaches the hub before the command's own result.
            drop(pages);
            let _ = reporter.join();
            match taken() {
                Some(JiraError::Stopped) => Outcome::Stopped,
                Some(error) if matches!(outcome, Outcome::Done(_)) => {
                    Outcome::Failed(error.to_string())
                }
                _ => outcome,
            }
        });
        let outcome = match outcome {
            Outcome::GiveBack {
                reason,
                held: Some(answer::Cause::Credentials),
            } => self.credentials_or_path(command, reason),
            other => other,
        };
        let outcome = self.bound_give_back(command, outcome);
        // Whether a write of this command may have been applied (read before the counters are
        // taken, which resets it).
        let wrote = self.jira.wrote();
        let spent = self.jira.take_counters();
        let mut not_before_seconds = None;
        let (status, result, error) = match outcome {
            Outcome::Done(value) => (ResultStatus::Done, Some(value), None),
            Outcome::Released(message) => {
                tracing::warn!(command = command.id, reason = %message, grace_seconds = self.release_grace.as_secs(), "a write's answer was lost: the command goes back to the hub, not written again now");
                not_before_seconds = Some(
                    self.release_grace
                        .max(self.jira.take_release_for())
                        .as_secs()
                        .clamp(1, u64::from(crate::protocol::MAX_NOT_BEFORE_SECONDS))
                        as u32,
                );
                (ResultStatus::Released, None, Some(message))
            }
            Outcome::Failed(message) => {
                tracing::warn!(command = command.id, error = %message, "command failed");
                (ResultStatus::Failed, None, Some(message))
            }
            Outcome::Conflict { error, result } => {
                tracing::warn!(command = command.id, error = %error, "an edit met a change made in Jira: nothing written");
                (ResultStatus::Failed, Some(result), Some(error))
            }
            Outcome::Stopped => {
                tracing::info!(
                    command = command.id,
                    "stopping: the command is left for the hub to hand out again"
                );
                return None;
            }
            Outcome::GiveBack { reason, held } => {
                // Jira held, or a wait past the lease: released at once, the delivery counted
                // only when a write of it may have been applied.
                let not_before = if held.is_some() {
                    HELD_NOT_BEFORE
                } else {
                    self.jira
                        .ready_in()
                        .clamp(Duration::from_secs(1), MAX_GIVE_BACK_WAIT)
                };
                let mut report = given_back(command, &reason, not_before, wrote);
                report.refused = self.refused.take();
                report.jira_calls = spent.calls;
                report.rate_limited = spent.rate_limited;
                tracing::info!(command = command.id, %reason, sent = wrote, "the command goes back to the hub unfinished");
                if let Err(error) = self.hub.report(vec![report]) {
                    tracing::warn!(command = command.id, %error, "the command given back was not acknowledged: its lease lapses");
                    self.last_error = Some(error.to_string());
                }
                return Some((reason, held, not_before));
            }
        };
        let finished_at = crate::domain::time::format_utc(self.waits.wall());
        let report = CommandResult {
            command_id: command.id,
            delivery: command.delivery,
            status,
            result: result.map(RawJson::from),
            error,
            jira_calls: spent.calls,
            rate_limited: spent.rate_limited,
            finished_at: (status != ResultStatus::Released).then_some(finished_at),
            page: None,
            not_before_seconds,
            // A lost answer: a write may have been applied; the delivery counts.
            sent: (status == ResultStatus::Released).then_some(true),
            refused: None,
        };
        match self.hub.report(vec![report]) {
            Ok(answer) => {
                for ignored in &answer.ignored {
                    tracing::info!(command = ignored.command_id, reason = %ignored.reason, "the hub ignored a result");
                }
                tracing::info!(command = command.id, status = %status.as_str(), "reported");
            }
            Err(error) => {
                tracing::warn!(command = command.id, %error, "the report was not acknowledged");
                self.last_error = Some(error.to_string());
            }
        }
        None
    }
}

/// The lease of the command being executed: renewed with a `progress` without a page (the hub
/// renews it and changes nothing else) when half of it has run out during a wait; a wait longer
/// than a whole lease is not begun (the command goes back to the hub).
pub(super) struct LeaseKeeper {
    pub(super) hub: Arc<HubLink>,
    pub(super) command_id: i64,
    pub(super) delivery: u32,
    /// The claim's commands not started yet (id, delivery), renewed with it; one the hub no
    /// longer renews is dropped from the list.
    pub(super) rest: Mutex<Vec<(i64, u32)>>,
    pub(super) lease: Duration,
    /// When the lease ends (monotonic).
    pub(super) deadline: Mutex<Duration>,
    /// The agent's heartbeat period: while the command runs, the keep-alive goes at least this
    /// often, so that the hub, which calls an agent silent after two periods without a request
    /// of its own, never shows it «Молчит» during a long wait or look.
    pub(super) every: Duration,
    /// When the agent last told the hub it is alive (the command's start, then each keep-alive;
    /// monotonic).
    pub(super) sent: Mutex<Duration>,
}

impl LeaseKeeper {
    pub(super) fn deadline(&self) -> Duration {
        self.deadline.lock().map(|d| *d).unwrap_or_default()
    }

    /// Sends the keep-alive; false when the hub says the lease is lost (or cannot be reached).
    fn renew(&self, now: Duration) -> bool {
        let keep_alive = |command_id: i64, delivery: u32| CommandResult {
            command_id,
            delivery,
            status: ResultStatus::Progress,
            result: None,
            error: None,
            jira_calls: 0,
            rate_limited: 0,
            finished_at: None,
            page: None,
            not_before_seconds: None,
            sent: None,
            refused: None,
        };
        let rest: Vec<(i64, u32)> = self.rest.lock().map(|r| r.clone()).unwrap_or_default();
        let mut reports = vec![keep_alive(self.command_id, self.delivery)];
        reports.extend(rest.iter().map(|(id, delivery)| keep_alive(*id, *delivery)));
        match self.hub.report(reports) {
            Ok(answer) if answer.accepted.contains(&self.command_id) => {
                if let Ok(mut sent) = self.sent.lock() {
                    *sent = now;
                }
                if let Ok(mut rest) = self.rest.lock() {
                    rest.retain(|(id, _)| answer.accepted.contains(id));
                }
                if let Ok(mut deadline) = self.deadline.lock() {
                    *deadline = now + self.lease;
                }
                tracing::debug!(command = self.command_id, "lease renewed");
                true
            }
            Ok(answer) => {
                let reason = answer
                    .ignored
                    .iter()
                    .find(|i| i.command_id == self.command_id)
                    .map(|i| i.reason.clone())
                    .unwrap_or_default();
                tracing::warn!(command = self.command_id, %reason, "the hub did not renew the lease: the command is left");
                false
            }
            Err(error) => {
                tracing::warn!(command = self.command_id, %error, "the lease could not be renewed");
                false
            }
        }
    }
}

impl wait::Lease for LeaseKeeper {
    fn may_wait(&self, now: Duration, wait: Duration) -> bool {
        let margin = safety_margin(self.lease);
        if now + wait + margin <= self.deadline() {
            return true;
        }
        // Longer than what is left: a fresh lease may cover it, never more than one.
        wait + margin <= self.lease && self.renew(now)
    }

    fn keep(&self, now: Duration) -> bool {
        let deadline = self.deadline();
        let sent = self.sent.lock().map(|s| *s).unwrap_or_default();
        if now + self.lease / 2 < deadline && now.saturating_sub(sent) < self.every {
            return true;
        }
        self.renew(now)
    }
}

/// Reports one refresh page, split into smaller reports when the hub will not take it whole
/// (larger than its `max_report_bytes`, or refused as too large): each half goes with its own
/// `start_at`, the first carrying the page's call counts. A single issue too large for the hub
/// fails the refresh with its size. Returns the hub's reason when it ignored the page.
fn report_page(
    hub: &HubLink,
    result: CommandResult,
    limit: Option<u64>,
) -> Result<Option<String>, LinkError> {
    let command_id = result.command_id;
    let mut pending = vec![result];
    while let Some(result) = pending.pop() {
        match hub.report_within(vec![result], limit) {
            Ok(answer) => {
                if let Some(ignored) = answer.ignored.iter().find(|i| i.command_id == command_id) {
                    return Ok(Some(ignored.reason.clone()));
                }
            }
            Err((LinkError::TooLarge { bytes, limit }, mut back)) => {
                let Some(mut first) = back.pop() else {
                    return Err(LinkError::TooLarge { bytes, limit });
                };
                let Some(page) = first.page.as_mut() else {
                    return Err(LinkError::TooLarge { bytes, limit });
                };
                if page.issues.len() <= 1 {
                    let key = page
                        .issues
                        .first()
                        .and_then(|raw| jira_api::issue_head(raw.get()).ok())
                        .map(|head| head.key)
                        .unwrap_or_default();
                    return Err(LinkError::Other(format!(
                        "задача {key} одна занимает {bytes} байт, больше, чем хаб принимает ({limit})"
                    )));
                }
                tracing::info!(
                    bytes,
                    %limit,
                    issues = page.issues.len(),
                    "a refresh page is larger than the hub takes: it goes in two halves"
                );
                let rest = page.issues.split_off(page.issues.len() / 2);
                let second_page = Page {
                    start_at: page.start_at + page.issues.len() as u64,
                    total: page.total,
                    issues: rest,
                };
                let second = CommandResult {
                    page: Some(second_page),
                    jira_calls: 0,
                    rate_limited: 0,
                    ..first.clone_without_page()
                };
                // The first half goes first: `pending` is a stack.
                pending.push(second);
                pending.push(first);
            }
            Err((error, _)) => return Err(error),
        }
    }
    Ok(None)
}

trait WithoutPage {
    fn clone_without_page(&self) -> CommandResult;
}

impl WithoutPage for CommandResult {
    /// The result's other members, with no page (cheap: a page is the bulk).
    fn clone_without_page(&self) -> CommandResult {
        CommandResult {
            command_id: self.command_id,
            delivery: self.delivery,
            status: self.status,
            result: self.result.clone(),
            error: self.error.clone(),
            jira_calls: self.jira_calls,
            rate_limited: self.rate_limited,
            finished_at: self.finished_at.clone(),
            page: None,
            not_before_seconds: self.not_before_seconds,
            sent: self.sent,
            refused: self.refused.clone(),
        }
    }
}
