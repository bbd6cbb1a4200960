//! The agent protocol (system.md §5, §6): claim, report, heartbeat, claim timeouts and pacing.
//!
//! [`HubConnection::handle_agent_request`] is the one entry point for both transports. Each request is
//! applied in one transaction together with the record of its id and answer, so a request seen
//! again (a relay file after a crash, an HTTP retry) gets the same answer and changes nothing.

use super::batches::settings_in;
use super::presence::Act;
use super::{HubConnection, Metrics, Result};
use crate::domain::command::truncate_error;
use crate::domain::time::{Utc, parse_utc};
use crate::protocol::{AgentAnswer, AgentRequest, CommandResult, ResultStatus};
use crate::store::{AgentSeen, StoreError, Tx};
use std::sync::atomic::Ordering;
use time::OffsetDateTime;

mod claims;
mod leases;
mod refresh;
mod reports;
mod runs;

use claims::{ClaimLook, claim_in, look_at_claim};
pub use leases::MAX_UNCOUNTED_RELEASES;
use leases::{expire_in, heartbeat_answer};
use refresh::Ingested;
pub(crate) use refresh::{Premapped, premap};
use reports::report_in;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::decode_value;
    use serde_json::{Value, json};

    fn hub(dir: &std::path::Path) -> HubConnection {
        let clock = std::sync::Arc::new(crate::clock::SystemClock);
        let (mut hub, _) = HubConnection::open(&dir.join("hub.sqlite"), clock).unwrap();
        let config: Value =
            serde_json::from_str(include_str!("../../../admin/jira-sync/config.example.json"))
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
