//! Where each agent was last seen, kept in memory.
//!
//! Every request of an agent tells the hub it is alive, but writing that down on every request
//! (and on every look at a waiting claim) was a synced commit four times a second for one idle
//! agent. [`Presence`] keeps the latest act of each agent in memory, shared by every connection
//! of the process (the relay's, the timers', the HTTP pool's), and says when it must be written:
//!
//! - at once when the agent's status really changed (first seen by this process, another
//!   version, Jira's state or the last error, a preflight, another heartbeat period);
//! - otherwise at most once every [`PERSIST_EVERY`] (the timers' flush), so a restart of the hub
//!   loses at most that much of "last seen";
//! - and, whatever the minute says, before the time as written would make the agent look silent
//!   while it is not ([`SILENCE_MARGIN`] ahead of it): so the database never calls an agent
//!   silent that the hub's memory does not, and another process (the CLI's `status`,
//!   `refresh --wait`) judges it from the database by the same rule, [`agent_is_silent`], with
//!   no slack.
//!
//! The liveness it keeps is the agent's own: a request counts when the agent sent it (a relay
//! file at its `sent_at`, never later than the hub's now; an HTTP request when it arrives), and
//! a waiting claim looked at again tells nothing new.

use crate::domain::time::Utc;
use std::collections::HashMap;
use std::sync::Mutex;
use time::OffsetDateTime;

/// How often at most the last-seen time of an agent whose status did not change is written.
pub const PERSIST_EVERY: time::Duration = time::Duration::seconds(60);

/// How long before the written last-seen time would make a live agent look silent the hub
/// writes the newer one (the timers flush every quarter second: four chances).
pub const SILENCE_MARGIN: time::Duration = time::Duration::seconds(1);

/// How many agents the process remembers in memory; past it, the one seen longest ago is
/// forgotten (it is in the database: it was written when first seen).
const REMEMBERED: usize = 10_000;

/// What one request of an agent tells about it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Act<'a> {
    pub agent: &'a str,
    /// When the agent acted (see the module's notes).
    pub at: Option<OffsetDateTime>,
    pub version: Option<&'a str>,
    /// With `version`: what the agent said of itself, as stored ([`super::views::peer_text`]).
    pub peer: Option<String>,
    /// A claim for work (a preflight's claim of no command is not one).
    pub claimed: bool,
    pub reported: bool,
    /// From a heartbeat: whether Jira answered, and the agent's last error.
    pub jira: Option<(bool, Option<&'a str>)>,
    /// From a heartbeat that carried a preflight.
    pub check: Option<&'a crate::protocol::CheckReport>,
    /// From a heartbeat that announced its period.
    pub heartbeat_seconds: Option<u32>,
}

/// One agent as this process knows it.
#[derive(Debug, Clone)]
struct Entry {
    last_seen: OffsetDateTime,
    claimed: bool,
    reported: bool,
    version: Option<String>,
    peer: Option<String>,
    jira: Option<(bool, Option<String>)>,
    heartbeat_seconds: Option<u32>,
    /// Claimed work or reported since this process first saw it (a check only never does).
    worked: bool,
    /// Sent a preflight (`agent --check`) since this process first saw it.
    checked: bool,
    /// The last-seen time as last written, and when (the hub's clock); `None`: not yet written
    /// by this process.
    written: Option<(OffsetDateTime, OffsetDateTime)>,
    /// A change of status not written yet (its request wrote nothing): the next flush writes it.
    urgent: bool,
}

/// What the store is to write of one agent.
#[derive(Debug, Clone)]
pub(crate) struct Due {
    pub agent: String,
    pub at: Utc,
    pub claimed: bool,
    pub reported: bool,
    pub heartbeat_seconds: Option<u32>,
}

/// The agents' latest acts, shared by every connection of a process.
#[derive(Debug, Default)]
pub struct Presence {
    agents: Mutex<HashMap<String, Entry>>,
    /// Agents whose requests the hub refused for their token: since when, and the last one
    /// (bounded like the agents: at most [`REMEMBERED`] names, the oldest forgotten first).
    token_refused: Mutex<HashMap<String, (OffsetDateTime, OffsetDateTime)>>,
}

impl Presence {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes in an act; returns whether it must be written now (a real change of status, or the
    /// last write is [`PERSIST_EVERY`] old). Nothing is marked written: see [`Presence::written`].
    pub(crate) fn note(&self, act: &Act<'_>, now: OffsetDateTime) -> bool {
        let at = act.at.unwrap_or(now).min(now);
        if let Ok(mut refused) = self.token_refused.lock() {
            // A request the hub took: its token is good again.
            refused.remove(act.agent);
        }
        let mut agents = self.lock();
        if !agents.contains_key(act.agent) && agents.len() >= REMEMBERED {
            forget_oldest(&mut agents);
        }
        let entry = agents
            .entry(act.agent.to_string())
            .or_insert_with(|| Entry {
                last_seen: at,
                claimed: false,
                reported: false,
                version: None,
                peer: None,
                jira: None,
                heartbeat_seconds: None,
                worked: false,
                checked: false,
                written: None,
                urgent: true,
            });
        entry.last_seen = entry.last_seen.max(at);
        entry.worked |= act.claimed || act.reported;
        entry.checked |= act.check.is_some();
        entry.claimed |= act.claimed;
        entry.reported |= act.reported;
        let mut changed = entry.written.is_none();
        if let Some(version) = act.version
            && entry.version.as_deref() != Some(version)
        {
            entry.version = Some(version.to_string());
            changed = true;
        }
        if act.version.is_some() && entry.peer != act.peer {
            entry.peer = act.peer.clone();
            changed = true;
        }
        if let Some((ok, error)) = act.jira {
            let jira = (ok, error.map(str::to_string));
            if entry.jira.as_ref() != Some(&jira) {
                entry.jira = Some(jira);
                changed = true;
            }
        }
        if act.heartbeat_seconds.is_some() && act.heartbeat_seconds != entry.heartbeat_seconds {
            entry.heartbeat_seconds = act.heartbeat_seconds;
            changed = true;
        }
        changed |= act.check.is_some();
        entry.urgent |= changed;
        entry.urgent || entry.due(now)
    }

    /// The hub refused a request in `agent`'s name for its token (the name is the request's own
    /// word: such a request is not trusted, and is only shown). Anyone can name any agent so:
    /// the mark shows only on an agent the hub already knows, and only while no request of it
    /// the hub took is newer; at most [`REMEMBERED`] names are kept.
    pub(crate) fn token_refused(&self, agent: &str, now: OffsetDateTime) {
        let Ok(mut refused) = self.token_refused.lock() else {
            return;
        };
        if !refused.contains_key(agent) && refused.len() >= REMEMBERED {
            let oldest = refused
                .iter()
                .min_by_key(|(_, (_, last))| *last)
                .map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                refused.remove(&oldest);
            }
        }
        let entry = refused.entry(agent.to_string()).or_insert((now, now));
        entry.1 = now;
    }

    /// What a request that wrote nothing leaves to write: a change of status stays urgent (the
    /// timers' next flush writes it).
    /// `seen`: the last-seen time that was written (a later act noted meanwhile stays due).
    pub(crate) fn written(&self, agent: &str, seen: OffsetDateTime, now: OffsetDateTime) {
        if let Some(entry) = self.lock().get_mut(agent) {
            entry.written = Some((seen.min(entry.last_seen), now));
            entry.urgent = false;
            entry.claimed = false;
            entry.reported = false;
        }
    }

    /// The agents to write now: every urgent one, and those whose last-seen time moved since a
    /// write [`PERSIST_EVERY`] old. Marked written when `commit` says the write succeeded.
    pub(crate) fn due(&self, now: OffsetDateTime) -> Vec<Due> {
        self.unwritten_where(|e| e.urgent || e.due(now))
    }

    /// Everything still unwritten, whatever its age (the daemon's stop).
    pub(crate) fn unwritten(&self) -> Vec<Due> {
        self.unwritten_where(|e| e.urgent || e.written.is_some_and(|(seen, _)| seen < e.last_seen))
    }

    fn unwritten_where(&self, keep: impl Fn(&Entry) -> bool) -> Vec<Due> {
        self.lock()
            .iter()
            .filter(|(_, e)| keep(e))
            .map(|(name, e)| Due {
                agent: name.clone(),
                at: Utc::new(e.last_seen),
                claimed: e.claimed,
                reported: e.reported,
                heartbeat_seconds: e.heartbeat_seconds,
            })
            .collect()
    }

    /// The latest act of `agent` this process saw, with its heartbeat period, if it saw one.
    #[cfg(test)]
    pub(crate) fn seen(&self, agent: &str) -> Option<(OffsetDateTime, Option<u32>)> {
        self.lock()
            .get(agent)
            .map(|e| (e.last_seen, e.heartbeat_seconds))
    }

    /// Forgets one agent (an operator forgot it: its row is gone from the database too).
    pub(crate) fn forget(&self, agent: &str) {
        self.lock().remove(agent);
    }

    /// Forgets an agent (pruned from the database).
    pub(crate) fn forget_older_than(&self, before: OffsetDateTime) {
        self.lock().retain(|_, e| e.last_seen >= before || e.urgent);
    }
}

impl Entry {
    /// Whether a time that moved since the last write is due: the write is [`PERSIST_EVERY`]
    /// old, or the time as written is about to make the live agent look silent.
    fn due(&self, now: OffsetDateTime) -> bool {
        self.written.is_some_and(|(seen, when)| {
            seen < self.last_seen
                && (when + PERSIST_EVERY <= now
                    || seen
                        + time::Duration::seconds(super::views::silent_after(
                            self.heartbeat_seconds,
                        ))
                        - SILENCE_MARGIN
                        <= now)
        })
    }
}

/// THE rule of an agent's silence, the one every view applies — `GET /agents`,
/// `/metrics`, the console, `jira-hub status`, `refresh --wait` — at the moment it is asked:
/// silent when more than `silent_after` seconds (two heartbeat periods, or 20 minutes for an
/// agent that never told its period) passed since `last_seen` at `now`. An agent that only ever
/// ran a preflight (`check_only`: `agent --check`, no claim for work, no report) is a check,
/// never silent.
///
/// The hub judges by its memory's `last_seen`, another process by the database's: the hub
/// writes the time before the written one would make a live agent look silent (see the
/// module's notes), so both agree without any slack.
pub fn agent_is_silent(
    last_seen: OffsetDateTime,
    heartbeat_seconds: Option<u32>,
    check_only: bool,
    now: OffsetDateTime,
) -> bool {
    !check_only && (now - last_seen).whole_seconds() > super::views::silent_after(heartbeat_seconds)
}

/// How many heartbeats a silent agent missed by `now`: one each period since it was last seen
/// (silent at 2 min with a 30 s period: 4); 0 for one that never told its period.
pub fn missed_heartbeats(agent: &super::AgentView, now: OffsetDateTime) -> u64 {
    match agent.heartbeat_seconds {
        Some(period) if period > 0 => {
            let since = (now - agent.last_seen_at.at()).whole_seconds().max(0);
            u64::try_from(since / i64::from(period)).unwrap_or(0)
        }
        _ => 0,
    }
}

impl Presence {
    /// `agents` as read from the database, with what this process saw since (a later act, an
    /// agent not written yet, its period), each judged silent or not at `now`; most recently
    /// seen first, at most `limit`.
    pub(crate) fn judge(
        &self,
        mut agents: Vec<super::AgentView>,
        now: OffsetDateTime,
        limit: usize,
    ) -> Vec<super::AgentView> {
        let refused = self
            .token_refused
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        let known = self.lock();
        let listed: std::collections::HashSet<String> =
            agents.iter().map(|a| a.agent.clone()).collect();
        // Of the agents known only here, those that may rank among the `limit` most recently
        // seen: at most `limit`, picked in one pass over references (30,000 names
        // were a quadratic walk and a whole copy of the map on every look).
        let mut extra: Vec<(&String, &Entry)> = known
            .iter()
            // One written by this process and not in the database was forgotten there (by an
            // operator, from another process too): it shows again once it acts and is written.
            .filter(|(name, entry)| entry.written.is_none() && !listed.contains(name.as_str()))
            .collect();
        let recent_first = |a: &(&String, &Entry), b: &(&String, &Entry)| {
            b.1.last_seen.cmp(&a.1.last_seen).then_with(|| a.0.cmp(b.0))
        };
        if extra.len() > limit {
            extra.select_nth_unstable_by(limit, recent_first);
            extra.truncate(limit);
        }
        for (name, entry) in extra {
            agents.push(super::AgentView {
                agent: name.clone(),
                version: entry.version.clone(),
                peer: super::views::PeerView::of(entry.peer.as_deref()),
                last_seen_at: Utc::new(entry.last_seen),
                jira_ok: entry.jira.as_ref().map(|(ok, _)| *ok),
                last_error: entry.jira.as_ref().and_then(|(_, e)| e.clone()),
                last_check: None,
                // Known only here until its first write: a held Jira is a change of status,
                // written at once, so an agent only in memory has none to show.
                jira_down_since: None,
                jira_held: None,
                heartbeat_seconds: entry.heartbeat_seconds,
                check_only: entry.checked && !entry.worked,
                hub_refused: None,
                silent: false,
                silent_after_seconds: 0,
            });
        }
        for agent in &mut agents {
            if let Some(entry) = known.get(&agent.agent) {
                if entry.last_seen > agent.last_seen_at.at() {
                    agent.last_seen_at = Utc::new(entry.last_seen);
                }
                agent.heartbeat_seconds = entry.heartbeat_seconds.or(agent.heartbeat_seconds);
                agent.check_only &= !entry.worked;
            }
            if let Some((since, last)) = refused.get(&agent.agent)
                && *last >= agent.last_seen_at.at()
            {
                agent.hub_refused = Some(super::views::held_words(
                    "Хаб отвергает токен агента",
                    &Utc::new(*since),
                    now.date(),
                ));
            }
            agent.silent_after_seconds = super::views::silent_after(agent.heartbeat_seconds);
            agent.silent = agent_is_silent(
                agent.last_seen_at.at(),
                agent.heartbeat_seconds,
                agent.check_only,
                now,
            );
        }
        drop(known);
        agents.sort_by(|a, b| {
            b.last_seen_at
                .cmp(&a.last_seen_at)
                .then_with(|| a.agent.cmp(&b.agent))
        });
        agents.truncate(limit);
        agents
    }
}

/// Makes room among the remembered agents: forgets the tenth of them seen longest ago (none
/// with a change not yet written), so that a stream of new names costs one pass per
/// [`REMEMBERED`]/10 names, not one per name (they are in the database: each was written when
/// first seen).
fn forget_oldest(agents: &mut HashMap<String, Entry>) {
    let mut written: Vec<(OffsetDateTime, &String)> = agents
        .iter()
        .filter(|(_, e)| !e.urgent)
        .map(|(name, e)| (e.last_seen, name))
        .collect();
    let forget = (REMEMBERED / 10).clamp(1, written.len().max(1));
    if written.is_empty() {
        return;
    }
    if written.len() > forget {
        written.select_nth_unstable(forget);
        written.truncate(forget);
    }
    let names: Vec<String> = written.into_iter().map(|(_, name)| name.clone()).collect();
    for name in names {
        agents.remove(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_800_000_000 + seconds)
    }

    #[test]
    fn only_a_change_or_a_minute_makes_a_write() {
        let presence = Presence::default();
        let act = |s: i64, version: &'static str| Act {
            agent: "a",
            at: Some(at(s)),
            version: Some(version),
            claimed: true,
            ..Act::default()
        };
        assert!(presence.note(&act(0, "1"), at(0)), "first seen: written");
        presence.written("a", at(0), at(0));
        assert!(!presence.note(&act(10, "1"), at(10)), "nothing changed");
        assert!(!presence.note(&act(59, "1"), at(59)));
        assert!(
            presence.note(&act(60, "1"), at(60)),
            "a minute since the write"
        );
        presence.written("a", at(60), at(60));
        assert!(presence.note(&act(61, "2"), at(61)), "another version");
        presence.written("a", at(61), at(61));
        // A file's time later than the hub's now counts as now.
        assert!(!presence.note(&act(500, "2"), at(62)));
        assert_eq!(presence.seen("a").unwrap().0, at(62));
        // Nothing due before a minute; due after, though no request came.
        assert!(presence.due(at(100)).is_empty());
        assert_eq!(presence.due(at(122)).len(), 1);
    }
}

#[cfg(test)]
mod cost_tests {
    use super::*;

    fn seen(presence: &Presence, name: &str, at: OffsetDateTime) {
        presence.note(
            &Act {
                agent: name,
                at: Some(at),
                ..Act::default()
            },
            at,
        );
    }

    /// A stream of new names (each written to the database when first seen)
    /// never grows the memory past [`REMEMBERED`]. What the names cost in time is measured by
    /// `cargo bench --bench strangers` (30,000 names), not here.
    #[test]
    fn remembered_names_are_bounded() {
        let presence = Presence::default();
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_800_000_000);
        for n in 0..3 * REMEMBERED {
            let at = now + time::Duration::milliseconds(n as i64);
            let name = format!("agent-{n}");
            seen(&presence, &name, at);
            presence.written(&name, at, at);
        }
        assert!(presence.lock().len() <= REMEMBERED, "memory bounded");
        assert!(
            presence
                .lock()
                .contains_key(&format!("agent-{}", 3 * REMEMBERED - 1)),
            "the newest is kept"
        );
    }

    /// A look lists the `limit` most recently seen of the agents known only here (not yet
    /// written), newest first, whatever their number.
    #[test]
    fn a_look_lists_the_most_recent_of_the_agents_known_only_here() {
        let presence = Presence::default();
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_800_000_000);
        for n in 0..1_000 {
            seen(
                &presence,
                &format!("agent-{n}"),
                now + time::Duration::milliseconds(n),
            );
        }
        let listed = presence.judge(Vec::new(), now + time::Duration::seconds(1), 100);
        assert_eq!(listed.len(), 100);
        assert_eq!(listed[0].agent, "agent-999");
        assert_eq!(listed[99].agent, "agent-900");
    }
}
