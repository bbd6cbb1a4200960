//! The agent protocol (system.md §5, §6): claim, report, heartbeat, claim timeouts and pacing.
//!
//! [`HubConnection::handle_agent_request`] is the one entry point for both transports. Each request is
//! applied in one transaction together with the record of its id and answer, so a request seen
//! again (a relay file after a crash, an HTTP retry) gets the same answer and changes nothing.

use super::batches::{base_jql_in, settings_in};
use super::presence::Act;
use super::{HubConnection, Metrics, Result};
use crate::domain::command::{
    CommandStatus, CommandType, RunKind, RunStatus, backoff_pause, is_result_reference,
    substitute_result, truncate_error,
};
use crate::domain::issue::MirrorFields;
use crate::domain::jql::split_incremental;
use crate::domain::settings::{Settings, TransitionTarget};
use crate::domain::time::{Utc, parse_utc};
use crate::jira::{FieldIds, MirrorIssue, map_issue_text};
use crate::protocol::{
    AgentAnswer, AgentRequest, ClaimAnswer, ClaimRequest, ClaimedCommand, CommandResult,
    HeartbeatAnswer, HeartbeatRequest, Ignored, Kind, Page, Peer, PreviousRelease, ReportAnswer,
    ReportRequest, ResultStatus,
};
use crate::store::{AgentSeen, CommandRow, Finish, StoreError, Tx};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use time::OffsetDateTime;

/// How large the WAL grows at rest before the idle checkpoint empties it.
pub const IDLE_CHECKPOINT_BYTES: u64 = 1024 * 1024;

/// What a sweep of claim timeouts did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ExpiredClaims {
    pub confirmed_by_state: usize,
    pub requeued: usize,
    pub failed: usize,
    /// Commands of a cancelled batch whose delivery never reported: cancelled, never redelivered.
    pub cancelled: usize,
}

/// The time of one operation, as a value and as the text the store keeps (one reading of the
/// clock).
struct Now {
    at: OffsetDateTime,
    utc: Utc,
}

impl Now {
    fn of(at: OffsetDateTime) -> Now {
        Now {
            at,
            utc: Utc::new(at),
        }
    }

    fn text(&self) -> &str {
        self.utc.as_str()
    }
}

/// The refresh pages of a report mapped ahead of its transaction (by [`premap`], on another
/// thread while the relay applies the request before it), with the settings they were mapped
/// under. The transaction uses them only while those settings are still the stored ones;
/// otherwise it maps the pages itself.
pub(crate) struct Premapped {
    field_ids: std::collections::BTreeMap<String, String>,
    epic_names: Vec<String>,
    /// By the report's result index: that result's page, mapped issue by issue, in order.
    pages: Vec<Option<Vec<Mapped>>>,
}

/// One issue of a page, mapped for the mirror, or why it cannot be stored.
type Mapped = std::result::Result<MirrorIssue, String>;

impl Premapped {
    /// The mapped page of result `index`, when it was mapped under `settings`.
    fn take_page(&mut self, index: usize, settings: &Settings) -> Option<Vec<Mapped>> {
        let same = self.field_ids == settings.field_ids && self.epic_names == epic_names(settings);
        same.then(|| self.pages.get_mut(index)?.take()).flatten()
    }
}

/// Maps the refresh pages a request carries, as `settings` say (`None` when it carries none).
pub(crate) fn premap(request: &AgentRequest, settings: &Settings) -> Option<Premapped> {
    let AgentRequest::Report(report) = request else {
        return None;
    };
    if report.results.iter().all(|result| result.page.is_none()) {
        return None;
    }
    let ids = FieldIds::from_setting(&settings.field_ids);
    let names = epic_names(settings);
    let pages = report
        .results
        .iter()
        .map(|result| {
            let page = result.page.as_ref()?;
            Some(
                page.issues
                    .iter()
                    .map(|raw| map_issue_text(raw.get(), &ids, &names))
                    .collect(),
            )
        })
        .collect();
    Some(Premapped {
        field_ids: settings.field_ids.clone(),
        epic_names: names.into_iter().map(String::from).collect(),
        pages,
    })
}

/// The names of the issue types that are epics, which the mapping of a parent needs.
fn epic_names(settings: &Settings) -> Vec<&str> {
    settings
        .issue_types
        .iter()
        .map(|t| t.epic.name.as_str())
        .collect()
}

/// What a request that may wait came to: answered, or held (nothing to hand out yet).
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    Answered(AgentAnswer),
    /// A claim with `wait_seconds` that would hand out nothing (no command, no pause, no
    /// settings): nothing was recorded but that the agent was seen (and expired leases swept).
    /// Its transport holds it and asks again when the [`WorkSignal`](super::WorkSignal) moves,
    /// every [`WAIT_RECHECK`](super::WAIT_RECHECK), and once more with `may_wait` false when
    /// the wait ends.
    Waiting,
}

impl HubConnection {
    /// Applies one agent request exactly once and answers it (sent now, as over HTTP).
    pub fn handle_agent_request(&mut self, request: &AgentRequest) -> Result<AgentAnswer> {
        self.handle_prepared_request(request, None, Arrival::Live)
    }

    /// [`HubConnection::handle_agent_request`], with the request's refresh pages already mapped
    /// (see [`premap`]), arrived as `arrival` says.
    pub(crate) fn handle_prepared_request(
        &mut self,
        request: &AgentRequest,
        premapped: Option<Premapped>,
        arrival: Arrival,
    ) -> Result<AgentAnswer> {
        match self.handle_or_wait(request, premapped, false, arrival)? {
            Handled::Answered(answer) => Ok(answer),
            Handled::Waiting => unreachable!("a request that may not wait is never held"),
        }
    }

    /// Applies a request, or, when `may_wait` and it is a claim with `wait_seconds` that would
    /// hand out nothing, holds it ([`Handled::Waiting`]): the caller asks again later. A request
    /// whose id was handled gets its recorded answer either way.
    ///
    /// At rest nothing is written: a claim that would hand out nothing is looked
    /// at in a read transaction and answered (or held) without a record, a heartbeat that
    /// changes nothing is answered without one, and the agent's last-seen time goes to the
    /// [`Presence`](super::Presence) kept in memory, written with the request's own
    /// transaction only when its status changed or its last write is a minute old.
    pub(crate) fn handle_or_wait(
        &mut self,
        request: &AgentRequest,
        mut premapped: Option<Premapped>,
        may_wait: bool,
        arrival: Arrival,
    ) -> Result<Handled> {
        let may_wait = may_wait
            && !self.work.stopping()
            && matches!(request, AgentRequest::Claim(claim) if claim.wait_seconds > 0);
        let now = Now::of(self.clock.now());
        let streak = self.rate_limit_streak.load(Ordering::SeqCst);
        let kind = request.kind();
        let envelope = request.envelope().clone();
        let act = act_of(request, arrival);
        let write_seen = act
            .as_ref()
            .is_some_and(|act| self.presence.note(act, now.at));
        if let AgentRequest::Heartbeat(heartbeat) = request {
            self.metrics.note_held_class(
                &envelope.agent,
                heartbeat.jira_ok,
                heartbeat.jira_held_class.as_deref(),
            );
        }
        match request {
            // A claim that may wait is looked at in a read transaction first: most looks find
            // nothing, and a waiting claim must not take the write lock each time. A claim that
            // may not wait goes straight to the write transaction, as it did: one that finds
            // nothing there changes no page, so its commit writes nothing either.
            AgentRequest::Claim(claim) if may_wait => {
                // Nothing claimable was found at this generation of the work signal: a waiting
                // claim looked at again needs no look at the database.
                let generation = self.work.generation();
                if arrival == Arrival::Again && self.work.idle_at(generation) {
                    return Ok(Handled::Waiting);
                }
                match self
                    .store
                    .read(|tx| look_at_claim(tx, claim, &now, streak))?
                {
                    ClaimLook::Replay(answer) => return Ok(Handled::Answered(answer)),
                    ClaimLook::Idle(walked) => {
                        if walked {
                            self.work.set_idle_at(generation);
                        }
                        return Ok(Handled::Waiting);
                    }
                    ClaimLook::Work => {}
                }
            }
            AgentRequest::Heartbeat(heartbeat) if !write_seen => {
                // Nothing changed: nothing to write, nothing to record (applying it again
                // changes nothing either).
                Metrics::add(&self.metrics.heartbeats, 1);
                return Ok(Handled::Answered(AgentAnswer::Heartbeat(heartbeat_answer(
                    heartbeat,
                ))));
            }
            _ => {}
        }
        let mut ingested = Ingested::default();
        let mut waiting = false;
        let mut freed = false;
        let (answer, rate_limited, replay) =
            self.store
                .transact(|tx| -> Result<(AgentAnswer, Option<bool>, bool)> {
                    if let Some(stored) = tx.handled_request(kind.as_str(), &envelope.id)? {
                        let answer = serde_json::from_str(&stored).map_err(StoreError::from)?;
                        return Ok((answer, None, true));
                    }
                    if write_seen && let Some(act) = &act {
                        touch(tx, act, &now)?;
                    }
                    let (answer, rate_limited) = match request {
                        AgentRequest::Claim(claim) => {
                            let answer = claim_in(tx, claim, &now, streak, &mut freed)?;
                            if answer.commands.is_empty()
                                && answer.pause_seconds == 0
                                && answer.settings.is_none()
                            {
                                // Held, or answered empty: nothing is recorded (applying it
                                // again hands out what there is then, as a new claim would).
                                waiting = may_wait;
                                return Ok((AgentAnswer::Claim(answer), None, false));
                            }
                            (AgentAnswer::Claim(answer), None)
                        }
                        AgentRequest::Report(report) => {
                            let (answer, rate_limited) =
                                report_in(tx, report, &now, &mut ingested, premapped.as_mut())?;
                            (AgentAnswer::Report(answer), rate_limited)
                        }
                        AgentRequest::Heartbeat(heartbeat) => {
                            (AgentAnswer::Heartbeat(heartbeat_answer(heartbeat)), None)
                        }
                    };
                    let text = serde_json::to_string(&answer).map_err(StoreError::from)?;
                    tx.record_request(
                        kind.as_str(),
                        &envelope.id,
                        &envelope.agent,
                        now.text(),
                        &text,
                    )?;
                    Ok((answer, rate_limited, false))
                })?;
        if write_seen && !replay {
            let seen = act
                .as_ref()
                .and_then(|act| act.at)
                .map_or(now.at, |at| at.min(now.at));
            self.presence.written(&envelope.agent, seen, now.at);
        }
        if freed {
            // Expired leases went back to the queue: other waiting claims may take them.
            self.work.bump();
        }
        if waiting {
            return Ok(Handled::Waiting);
        }
        if !replay {
            let metrics = &self.metrics;
            match &answer {
                AgentAnswer::Claim(claim) => {
                    Metrics::add(&metrics.claims, 1);
                    Metrics::add(&metrics.commands_handed_out, claim.commands.len() as u64);
                }
                AgentAnswer::Report(report) => {
                    // An ended command may free those that depend on it.
                    let ended = report.accepted.iter().any(|id| {
                        request_results(request)
                            .any(|r| r.command_id == *id && r.status != ResultStatus::Progress)
                    });
                    if ended {
                        self.work.bump();
                    }
                    Metrics::add(&metrics.reports, 1);
                    Metrics::add(&metrics.results_accepted, report.accepted.len() as u64);
                    Metrics::add(&metrics.results_ignored, report.ignored.len() as u64);
                    Metrics::add(&metrics.refresh_pages, ingested.pages);
                    Metrics::add(&metrics.issues_ingested, ingested.stored);
                    Metrics::add(&metrics.issues_not_stored, ingested.not_stored);
                }
                AgentAnswer::Heartbeat(_) => Metrics::add(&metrics.heartbeats, 1),
            }
        }
        // Pacing follows the reports: rate limiting makes the pause grow, a clean report resets it.
        match rate_limited {
            Some(true) => {
                self.rate_limit_streak.fetch_add(1, Ordering::SeqCst);
            }
            Some(false) => self.rate_limit_streak.store(0, Ordering::SeqCst),
            None => {}
        }
        Ok(Handled::Answered(answer))
    }

    /// The timer's sweep: claimed commands whose report is overdue are confirmed from the mirror,
    /// re-queued, or failed once they used up their deliveries.
    pub fn expire_claims(&mut self) -> Result<ExpiredClaims> {
        let now = Now::of(self.clock.now());
        let (expired, released_due) =
            self.store.transact(|tx| -> Result<(ExpiredClaims, bool)> {
                let settings = settings_in(tx)?;
                Ok((expire_in(tx, &settings, &now)?, tx.released_due(&now.utc)?))
            })?;
        if expired != ExpiredClaims::default() {
            tracing::info!(?expired, "claims timed out");
        }
        // A command given back becomes claimable when its grace ends, which no write announces:
        // the sweep (every few seconds) wakes the claims waiting for work then, instead of their
        // safety look up to `WAIT_RECHECK` later. Once claimed, its `not_before` is cleared.
        if expired.requeued > 0 || released_due {
            self.work.bump();
        }
        Ok(expired)
    }

    /// Writes the agents' last-seen times that are due (the timers call it every quarter
    /// second): a change of status its request did not write (a new agent whose claim waits),
    /// and a time that moved, once a minute. One transaction for them all; none when nothing is
    /// due. Returns how many agents were written.
    pub fn flush_presence(&mut self) -> Result<usize> {
        let now = self.clock.now();
        let due = self.presence.due(now);
        self.write_presence(&due, now)
    }

    /// Writes every last-seen time still only in memory, however recent (the daemon's stop).
    pub fn flush_all_presence(&mut self) -> Result<usize> {
        let now = self.clock.now();
        let due = self.presence.unwritten();
        self.write_presence(&due, now)
    }

    fn write_presence(
        &mut self,
        due: &[super::presence::Due],
        now: OffsetDateTime,
    ) -> Result<usize> {
        if due.is_empty() {
            return Ok(0);
        }
        let seen: Vec<AgentSeen<'_>> = due
            .iter()
            .map(|due| AgentSeen {
                agent: &due.agent,
                at: due.at.as_str(),
                claimed: due.claimed,
                reported: due.reported,
                heartbeat_seconds: due.heartbeat_seconds,
                ..AgentSeen::default()
            })
            .collect();
        self.store.write_agents_seen(&seen)?;
        for due in due {
            self.presence.written(&due.agent, due.at.at(), now);
        }
        Ok(due.len())
    }

    /// When nothing was committed since the last call (by any connection, this one's own
    /// writes aside) and the WAL holds at least [`IDLE_CHECKPOINT_BYTES`], checkpoints it and
    /// truncates it to nothing without waiting for anyone (the WAL stays small
    /// whatever the uptime). A smaller WAL is left: at rest it grows by the minute's last-seen
    /// write, the same few pages again and again, which one checkpoint copies once; a
    /// checkpoint after each of them doubled what an idle hub writes. The sweep calls it every
    /// few seconds. Returns whether it truncated.
    pub fn checkpoint_when_idle(&mut self) -> Result<bool> {
        let version = self.store.data_version()?;
        let idle = self.idle_data_version.replace(version) == Some(version);
        if !idle || self.store.wal_bytes() < IDLE_CHECKPOINT_BYTES {
            return Ok(false);
        }
        Ok(self.store.checkpoint_truncate()?)
    }

    /// Another process (the CLI: `jira-hub refresh`, `commands retry`, `batches cancel`)
    /// commits without a signal in this one: a change of the database since this connection's
    /// last look (`PRAGMA data_version`, a read of shared memory, no I/O) wakes the claims that
    /// wait for work, so a command enqueued there reaches an idle agent as soon as the timers
    /// look (every quarter second). The daemon's own other connections move it too: a spare
    /// look at the queue, no more. Returns whether it woke them.
    pub fn notice_other_writers(&mut self) -> Result<bool> {
        let version = self.store.data_version()?;
        let changed = self.seen_data_version.is_some_and(|seen| seen != version);
        self.seen_data_version = Some(version);
        if changed {
            self.work.bump();
        }
        Ok(changed)
    }
}

/// How a request reached the hub, for its agent's liveness: a request counts
/// when the agent sent it, and never again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// Sent now (an HTTP request): the agent acted now.
    Live,
    /// A relay file: the agent acted at its `sent_at`, never later than the hub's now (a file
    /// read again tells nothing newer than it said the first time).
    File,
    /// A waiting claim looked at again: no new act of the agent.
    Again,
}

/// What `request` tells about its agent, arrived as `arrival` says (`None`: nothing new).
fn act_of(request: &AgentRequest, arrival: Arrival) -> Option<Act<'_>> {
    let at = match arrival {
        Arrival::Again => return None,
        Arrival::Live => None,
        Arrival::File => parse_utc(&request.envelope().sent_at),
    };
    let agent = request.envelope().agent.as_str();
    Some(match request {
        AgentRequest::Claim(claim) => Act {
            agent,
            at,
            version: Some(&claim.agent_version),
            peer: super::views::peer_text(&claim.peer),
            // A claim of no command is the preflight's look at the settings (`agent --check`):
            // an agent that only sent those is shown as a check, not as a silent agent.
            claimed: claim.max_commands > 0,
            ..Act::default()
        },
        AgentRequest::Report(_) => Act {
            agent,
            at,
            reported: true,
            ..Act::default()
        },
        AgentRequest::Heartbeat(heartbeat) => Act {
            agent,
            at,
            version: Some(&heartbeat.agent_version),
            peer: super::views::peer_text(&heartbeat.peer),
            // A heartbeat that carries a preflight is `agent --check`'s, run beside the agent of
            // that name (root's check of the service): its outcome is kept as the last check,
            // never as the running agent's state of Jira, which it would paint green while the
            // service itself is refused.
            jira: heartbeat
                .check
                .is_none()
                .then_some((heartbeat.jira_ok, heartbeat.last_error.as_deref())),
            check: heartbeat.check.as_ref(),
            heartbeat_seconds: heartbeat.heartbeat_seconds,
            ..Act::default()
        },
    })
}

/// Writes what `act` tells of its agent (its last-seen time no later than `now`).
fn touch(tx: &Tx<'_>, act: &Act<'_>, now: &Now) -> Result<()> {
    let at = act
        .at
        .map_or_else(|| now.utc.clone(), |at| Utc::new(at.min(now.at)));
    let last_error = act.jira.and_then(|(_, error)| error).map(truncate_error);
    // The preflight it ran (`--check`), bounded by the decoder: kept as the agent's last.
    let check = act
        .check
        .and_then(|check| serde_json::to_string(check).ok());
    tx.touch_agent(&AgentSeen {
        agent: act.agent,
        at: at.as_str(),
        version: act.version,
        peer: act.peer.as_deref(),
        claimed: act.claimed,
        reported: act.reported,
        jira: act.jira.map(|(ok, _)| (ok, last_error.as_deref())),
        check: check.as_deref(),
        heartbeat_seconds: act.heartbeat_seconds,
    })?;
    Ok(())
}

/// The results a request carries (a report's; none for the others).
fn request_results(request: &AgentRequest) -> impl Iterator<Item = &CommandResult> {
    match request {
        AgentRequest::Report(report) => report.results.iter(),
        _ => [].iter(),
    }
}

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
fn claim_in(
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
enum ClaimLook {
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
fn look_at_claim(tx: &Tx<'_>, claim: &ClaimRequest, now: &Now, streak: u32) -> Result<ClaimLook> {
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

/// Opens the run of a refresh command, recording whether it is full: its query is the base JQL
/// at this moment.
fn start_run(
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

fn dependency_failed(dependency: &CommandRow) -> String {
    format!(
        "Команда {} этого пакета, от которой зависит эта, завершилась со статусом «{}»",
        dependency.seq,
        dependency.status.label()
    )
}

/// A command that ended without satisfying its dependents: they (and theirs) are skipped.
/// Walked with a work list, not recursion: a chain of 10,000 commands (a batch's limit) is as
/// deep as it is long, and the caller's transaction holds every change.
fn skip_dependents(
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

/// Applies a report; returns the answer and whether it brought rate limiting (`None` when it
/// carried no accepted result, so pacing stays as it is).
fn report_in(
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
fn earlier_ended(tx: &Tx<'_>, command: &CommandRow) -> Result<Option<Utc>> {
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

/// A command its agent gave back (`released`): queued again with its delivery count,
/// not handed out before the grace the agent asked for; `failed` instead once it has had
/// `max_deliveries` deliveries. A refresh's open run fails (the next delivery starts another).
fn release(
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
    // command's deliveries.
    let counted = result.sent != Some(false);
    if !counted && let Some(spent) = uncounted_budget_spent(command, now) {
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
        counted,
        refusal.as_deref(),
    )?;
    tracing::info!(
        command = command.id,
        grace,
        counted,
        reason = %reason,
        "the agent gave a command back: queued again after its grace"
    );
    Ok(())
}

/// How many times in a row a command may be given back with nothing sent to Jira (`released`,
/// `sent: false`) before the hub fails it with the last reason.
pub const MAX_UNCOUNTED_RELEASES: u32 = 20;
/// How long a command may go on being given back uncounted, from the first of them, before the
/// hub fails it the same way.
pub(crate) const MAX_UNCOUNTED_AGE: time::Duration = time::Duration::hours(1);

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
fn keep_alive(
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

/// The open run of a refresh command, started now if its first sign of life is a page or its
/// result (a claim normally starts it).
fn run_of(tx: &Tx<'_>, command: &CommandRow, now: &Now) -> Result<crate::store::RunRow> {
    if let Some(run) = tx.open_run(command.id)? {
        return Ok(run);
    }
    start_run(tx, &settings_in(tx)?, command, now)
}

/// What the pages of one report did to the mirror, for the metrics.
#[derive(Debug, Default)]
struct Ingested {
    /// Refresh pages applied.
    pages: u64,
    stored: u64,
    /// Issues of a page the hub could not map or could not give back (logged each).
    not_stored: u64,
}

/// Pages of this many issues or more are mapped on a second thread while they are stored.
const PIPELINE_FROM: usize = 64;
/// The mapping thread hands issues over this many at a time: one wake-up per issue would cost
/// more than the mapping of it.
const MAP_CHUNK: usize = 50;

fn ingest_page(
    tx: &Tx<'_>,
    settings: &Settings,
    command: &CommandRow,
    page: &Page,
    premapped: Option<Vec<Mapped>>,
    now: &Now,
    ingested: &mut Ingested,
) -> Result<()> {
    let run = run_of(tx, command, now)?;
    let ids = FieldIds::from_setting(&settings.field_ids);
    let epic_names = epic_names(settings);
    let (mut seen, mut changed) = (0, 0);
    let mut writer = tx.issue_writer()?;
    let mut store = |mapped: Mapped| -> Result<()> {
        match mapped {
            Ok(issue) => {
                let upserted = writer.upsert(&issue, &now.utc)?;
                seen += 1;
                changed += i64::from(upserted.changed);
                if upserted.moved_from_other_key {
                    tracing::info!(
                        key = %issue.mirrored.key,
                        "an issue came under a new key (moved in Jira); its notes and links follow it"
                    );
                }
            }
            Err(reason) => {
                ingested.not_stored += 1;
                tracing::warn!(command = command.id, %reason, "an issue of a refresh page was not stored")
            }
        }
        Ok(())
    };
    let (ids, epic_names) = (&ids, &epic_names);
    let map = |raw: &crate::protocol::RawJson| map_issue_text(raw.get(), ids, epic_names);
    if let Some(premapped) = premapped.filter(|issues| issues.len() == page.issues.len()) {
        for issue in premapped {
            store(issue)?;
        }
    } else if page.issues.len() < PIPELINE_FROM {
        for raw in &page.issues {
            store(map(raw))?;
        }
    } else {
        // A second thread maps the page's issues, in order, while this one stores them.
        std::thread::scope(|scope| -> Result<()> {
            let (sender, mapped) = std::sync::mpsc::sync_channel::<Vec<_>>(4);
            let mapper = std::thread::Builder::new()
                .name("ingest-map".into())
                .spawn_scoped(scope, move || {
                    for chunk in page.issues.chunks(MAP_CHUNK) {
                        // The receiver is gone when storing failed: nothing more is wanted.
                        if sender.send(chunk.iter().map(&map).collect()).is_err() {
                            break;
                        }
                    }
                });
            if mapper.is_err() {
                for raw in &page.issues {
                    store(map(raw))?;
                }
                return Ok(());
            }
            for issue in mapped.into_iter().flatten() {
                store(issue)?;
            }
            Ok(())
        })?;
    }
    tx.count_run_page(run.id, seen, changed, page.total)?;
    ingested.stored += seen as u64;
    ingested.pages += 1;
    Ok(())
}

/// A refresh reported done: its run closes; the boards' types are recorded; a full run (its query
/// is the base JQL now) removes the issues it did not return.
fn complete_refresh(
    tx: &Tx<'_>,
    settings: &Settings,
    command: &CommandRow,
    result: Option<&Value>,
    now: &Now,
) -> Result<()> {
    let run = run_of(tx, command, now)?;
    let boards = result
        .and_then(|r| r.get("boards"))
        .and_then(Value::as_array);
    for board in boards.into_iter().flatten() {
        let id = board.get("id").and_then(Value::as_i64);
        let board_type = board
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| matches!(*t, "scrum" | "kanban"));
        if let (Some(id), Some(board_type)) = (id, board_type) {
            tx.set_board_type(id, board_type)?;
        }
    }
    // Pruning needs a run that was full when it started and whose query is still the whole
    // scope: a project added meanwhile has issues this run never asked for. An incremental run
    // never prunes: it returns only what changed.
    let full =
        run.kind == RunKind::Full && base_jql_in(tx, settings)?.is_some_and(|jql| jql == run.query);
    if full {
        return prune_or_hold(tx, settings, &run, now);
    }
    tx.finish_run(run.id, RunStatus::Done, &now.utc, None)?;
    Ok(())
}

/// The end of a full run: the issues it missed leave the mirror, unless in some
/// project they are more than `prune_guard` allows, or all of its issues. Then the run ends
/// `held` with what it would remove, and nothing is removed until an operator confirms it. A
/// later full run that misses the same issues does not confirm it (the same wrong
/// answer twice, a permission lost or a filter changed, is no proof): it is held in its turn
/// and supersedes the older one.
fn prune_or_hold(
    tx: &Tx<'_>,
    settings: &Settings,
    run: &crate::store::RunRow,
    now: &Now,
) -> Result<()> {
    let labels: Vec<String> = tx.projects()?.into_iter().map(|p| p.label).collect();
    let preview = tx.prune_preview(&run.started_at, &labels)?;
    let guard = settings.prune_guard;
    let over: Vec<&(String, u64, u64)> = preview
        .by_label
        .iter()
        .filter(|(_, total, missing)| {
            guard.holds(*missing, *total) || (*total > 0 && missing == total)
        })
        .collect();
    if !over.is_empty() {
        let projects = serde_json::to_string(
            &over
                .iter()
                .map(|(label, total, missing)| json!({"label": label, "issues": total, "missing": missing}))
                .collect::<Vec<_>>(),
        )
        .map_err(crate::store::StoreError::from)?;
        let words: Vec<String> = over
            .iter()
            .map(|(label, total, missing)| format!("{label}: {missing} из {total}"))
            .collect();
        let message = format!(
            "удаление {} из зеркала ждёт подтверждения ({}; предел prune_guard: {}% и не меньше {}, а также все задачи проекта): jira-hub refresh confirm {}",
            crate::domain::words::count(
                preview.keys.len() as u64,
                &crate::domain::words::ISSUES_GENITIVE
            ),
            words.join(", "),
            guard.max_percent,
            guard.min_issues,
            run.id
        );
        tracing::warn!(
            run = run.id,
            would_remove = preview.keys.len(),
            "a full refresh would remove too much of the mirror: held for a confirmation"
        );
        tx.supersede_held(
            run.id,
            &format!("заменён более новым полным обновлением №{}", run.id),
        )?;
        tx.hold_prune(run.id, &preview.keys, &projects, &now.utc)?;
        tx.finish_run(run.id, RunStatus::Held, &now.utc, Some(&message))?;
        return Ok(());
    }
    let removed = tx.prune_unseen(&run.started_at)?;
    tx.supersede_held(
        run.id,
        &format!("заменён более новым полным обновлением №{}", run.id),
    )?;
    if removed > 0 {
        tracing::info!(
            removed,
            "issues that left the hub's scope were removed from the mirror"
        );
    }
    tx.finish_run(run.id, RunStatus::Done, &now.utc, None)?;
    Ok(())
}

fn heartbeat_answer(heartbeat: &HeartbeatRequest) -> HeartbeatAnswer {
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

fn lease_timeout(settings: &Settings) -> time::Duration {
    time::Duration::seconds(i64::from(settings.pacing.claim_timeout_seconds))
}

/// Whether a claimed command's lease (from its last sign of life, or its claim) is over.
fn lease_over(command: &CommandRow, timeout: time::Duration, now: &Now) -> bool {
    let lease = command
        .lease_at
        .as_ref()
        .or(command.claimed_at.as_ref())
        .map(Utc::at);
    lease.is_none_or(|at| at + timeout <= now.at)
}

fn expire_in(tx: &Tx<'_>, settings: &Settings, now: &Now) -> Result<ExpiredClaims> {
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
fn confirm_by_state(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::decode_value;

    fn hub(dir: &std::path::Path) -> HubConnection {
        let clock = std::sync::Arc::new(crate::clock::SystemClock);
        let (mut hub, _) = HubConnection::open(&dir.join("hub.sqlite"), clock).unwrap();
        let config: Value =
            serde_json::from_str(include_str!("../../admin/jira-sync/config.example.json"))
                .unwrap();
        hub.init_from_config(&config, false).unwrap();
        hub
    }

    /// A progress report of one page with one issue whose epic link is in `customfield_10101`
    /// and whose parent-like custom field `customfield_777` names another epic.
    fn page_report(id: &str, command_id: i64, delivery: u32, summary: &str) -> AgentRequest {
        decode_value(
            json!({"kind": "report", "id": id, "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
            "results": [{"command_id": command_id, "delivery": delivery, "status": "progress",
                "jira_calls": 1, "page": {"start_at": 0, "total": 1, "issues": [
                    {"id": "10001", "key": "AURORA-1", "fields": {"summary": summary,
                        "status": {"name": "Открыт"}, "issuetype": {"name": "Задача"},
                        "labels": ["AWPCA"], "customfield_10101": "AURORA-100",
                        "customfield_777": "AURORA-777"}}]}}]}),
        )
        .unwrap()
    }

    /// Pages mapped ahead are used while the settings they were mapped under are the stored
    /// ones; after a change of `field_ids` the transaction maps the page again.
    #[test]
    fn pages_mapped_ahead_are_used_only_under_the_settings_they_were_mapped_with() {
        let dir = tempfile::tempdir().unwrap();
        let mut hub = hub(dir.path());
        hub.enqueue_refresh(None, "test").unwrap();
        let claim = decode_value(json!({"kind": "claim", "id": "c1", "agent": "a",
            "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1", "settings_version": 0,
            "max_commands": 1}))
        .unwrap();
        let AgentAnswer::Claim(claimed) = hub.handle_agent_request(&claim).unwrap() else {
            panic!("not a claim answer");
        };
        let (command, delivery) = (claimed.commands[0].id, claimed.commands[0].delivery);
        let settings = hub.settings().unwrap();

        // The same settings: what was mapped ahead is what is stored (here, deliberately, the
        // mapping of another report, so that using it shows).
        let request = page_report("r1", command, delivery, "из запроса");
        let ahead = premap(&page_report("x", command, delivery, "заранее"), &settings);
        hub.handle_prepared_request(&request, ahead, Arrival::Live)
            .unwrap();
        let stored = hub.issue("AURORA-1").unwrap().issue;
        assert_eq!(stored.summary, "заранее");
        assert_eq!(stored.epic_key.as_deref(), Some("AURORA-100"));

        // `field_ids` changed after the page was mapped: it is mapped again, as stored now.
        let request = page_report("r2", command, delivery, "после смены настроек");
        let ahead = premap(&request, &settings);
        let update = json!({"field_ids": {"epic_link": "customfield_777", "sprint": "customfield_10105",
            "plan_start": "customfield_12001", "plan_end": "customfield_12002"}});
        hub.update_settings(update.as_object().unwrap()).unwrap();
        hub.handle_prepared_request(&request, ahead, Arrival::Live)
            .unwrap();
        let stored = hub.issue("AURORA-1").unwrap().issue;
        assert_eq!(stored.summary, "после смены настроек");
        assert_eq!(stored.epic_key.as_deref(), Some("AURORA-777"));
    }
}
