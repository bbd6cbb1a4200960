//! Counters of what the hub did since it started, shared by every `HubConnection` of the process (the
//! relay's, the timers', the HTTP pool's). `GET /metrics` shows them beside figures read from the
//! database at scrape time (queue depth, age of the last full refresh).

use crate::domain::time::Utc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A relay loop silent for longer than this is stuck (a pass beats before every file and every
/// megabyte read): `/ready` says so and the daemon stops feeding systemd's watchdog.
pub(crate) const RELAY_STALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

#[derive(Debug, Default)]
pub struct Metrics {
    /// Claim requests applied (replays of a handled id are not counted again).
    pub claims: AtomicU64,
    /// Commands handed out by those claims.
    pub commands_handed_out: AtomicU64,
    pub reports: AtomicU64,
    pub results_accepted: AtomicU64,
    pub results_ignored: AtomicU64,
    pub heartbeats: AtomicU64,
    /// Refresh pages applied to the mirror.
    pub refresh_pages: AtomicU64,
    /// Raw Jira issues stored in the mirror by refresh pages.
    pub issues_ingested: AtomicU64,
    /// Raw Jira issues of refresh pages left out of the mirror (no key, no `fields` object,
    /// `fields` nested deeper than the hub can read back).
    pub issues_not_stored: AtomicU64,
    /// Relay files refused into `rejected/`.
    pub relay_refused: AtomicU64,
    /// Passes of the relay over `inbox/` (each lists it once): at rest, about one a poll
    /// interval, however the folder is watched.
    pub relay_passes: AtomicU64,
    /// Request files left in `inbox/` after the relay's last pass (waiting to arrive whole, or
    /// beyond the pass's reading budget).
    pub relay_files_waiting: AtomicU64,
    /// Claims held over HTTP now while they wait for work.
    pub claims_waiting_http: AtomicU64,
    /// Claim files the relay's last pass left parked in `inbox/`, waiting for work.
    pub claims_waiting_relay: AtomicU64,
    /// The relay found its folder missing on its last pass (the share is not mounted).
    pub relay_missing: std::sync::atomic::AtomicBool,
    /// Relay files refused on one day of the hub's UTC clock: the day and how many. Counted by
    /// the relay as it refuses, from what `rejected/` held for that day when it took the folder,
    /// so that nothing else reads the share to tell it.
    relay_refused_day: std::sync::Mutex<Option<(time::Date, u64)>>,
    /// When the relay loop last showed it is alive (milliseconds since the Unix epoch; 0 before
    /// it started): a relay stuck in a system call must show in `/ready` and stop the watchdog.
    pub relay_beat_ms: AtomicU64,
    /// Why the relay cannot use its folder now (a folder of the share that is a link), if so.
    pub relay_problem: std::sync::Mutex<Option<String>>,
    /// How late the relay sees the agent's files (the median of its recent requests, on the file
    /// server's clock), and, when that is late, the line that says so and names the mount option
    /// that removes it. `None` until measured.
    relay_visibility: std::sync::Mutex<Option<(std::time::Duration, Option<String>)>>,
    /// Finished batches, their commands and attempts pruned past their retention by this
    /// process, and records of handled agent requests forgotten.
    pub pruned_batches: AtomicU64,
    pub pruned_commands: AtomicU64,
    pub pruned_attempts: AtomicU64,
    pub pruned_agent_requests: AtomicU64,
    /// Where the retention walk goes on from: the last batch id it looked at (0: the start).
    pub(crate) retention_cursor: std::sync::atomic::AtomicI64,
    /// Warnings about stored settings already logged by this process (each is told once).
    pub settings_warnings_told: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// What the committed transactions of this process did: commands that reached a final
    /// status, Jira calls and rate-limited answers the agent reported (the store counts them as
    /// it commits; shared by every connection of the process).
    pub(crate) tallies: std::sync::Arc<crate::store::Tallies>,
    /// Requests refused for want of a valid credential, by credential, since the start.
    auth_failures: [AtomicU64; Credential::ALL.len()],
    /// Bearer failures not yet in the log, and when the last summary was written.
    auth_summary: std::sync::Mutex<AuthSummary>,
    /// While Jira is held for an agent, the class of why as the agent itself sorted it (its
    /// heartbeat's `jira_held_class`), by agent. In memory: after a restart, until the agent's
    /// next heartbeat, and for an agent that sends none, [`error_class`] sorts its words.
    held_classes: std::sync::Mutex<std::collections::HashMap<String, &'static str>>,
}

/// The classes of why Jira is held that the hub knows (the label's bounded values).
const HELD_CLASSES: [&str; 5] = [
    "credentials",
    "unreachable",
    "rate_limited",
    "probe",
    "other",
];

/// Agents whose held class is kept at most (names come only with the agent token).
const HELD_CLASSES_KEPT: usize = 1000;

/// The credentials a request can fail to show: the client token (API), the agent token (its
/// HTTP endpoints), the metrics token (`--metrics-token-file`), the console's sign-in form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    Client,
    Agent,
    Metrics,
    Console,
}

impl Credential {
    pub const ALL: [Credential; 4] = [
        Credential::Client,
        Credential::Agent,
        Credential::Metrics,
        Credential::Console,
    ];

    /// The word of the `credential` label.
    pub fn name(self) -> &'static str {
        match self {
            Credential::Client => "client",
            Credential::Agent => "agent",
            Credential::Metrics => "metrics",
            Credential::Console => "console",
        }
    }
}

/// Bearer failures since the last summary line, by credential, and when it was written.
#[derive(Debug, Default)]
struct AuthSummary {
    unlogged: [u64; Credential::ALL.len()],
    logged_at: Option<time::OffsetDateTime>,
}

/// Bearer failures are summed up in the log at most this often (as the console's sign-ins are).
const AUTH_SUMMARY_EVERY: time::Duration = time::Duration::MINUTE;

impl Metrics {
    /// Counters from zero, with the store's `tallies` of what its commits did.
    pub(crate) fn with_tallies(tallies: std::sync::Arc<crate::store::Tallies>) -> Metrics {
        Metrics {
            tallies,
            ..Metrics::default()
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// `n` more files refused on `day` (a new day starts from `n`).
    pub(crate) fn count_refused_on(&self, day: time::Date, n: u64) {
        if let Ok(mut slot) = self.relay_refused_day.lock() {
            *slot = match *slot {
                Some((counted, so_far)) if counted == day => Some((day, so_far + n)),
                _ => Some((day, n)),
            };
        }
    }

    /// The relay took a folder whose `rejected/` holds `n` refusals from `day`.
    pub(crate) fn set_refused_on(&self, day: time::Date, n: u64) {
        if let Ok(mut slot) = self.relay_refused_day.lock() {
            *slot = Some((day, n));
        }
    }

    /// Relay files refused on `day`, as far as the relay has counted.
    pub fn refused_on(&self, day: time::Date) -> u64 {
        match self.relay_refused_day.lock().map(|slot| *slot) {
            Ok(Some((counted, n))) if counted == day => n,
            _ => 0,
        }
    }

    /// The relay loop is alive now.
    pub(crate) fn relay_beat(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.relay_beat_ms.store(now, Ordering::Relaxed);
    }

    /// How long ago the relay loop was last alive; `None` before it started.
    pub(crate) fn relay_silent_for(&self) -> Option<std::time::Duration> {
        let beat = self.relay_beat_ms.load(Ordering::Relaxed);
        if beat == 0 {
            return None;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Some(std::time::Duration::from_millis(now.saturating_sub(beat)))
    }

    /// How long the relay loop has been silent, when that is longer than
    /// [`RELAY_STALL_LIMIT`]: it is stuck.
    pub(crate) fn relay_stalled_for(&self) -> Option<std::time::Duration> {
        self.relay_silent_for()
            .filter(|silent| *silent > RELAY_STALL_LIMIT)
    }

    /// Records why the relay cannot use its folder (or that it can again).
    pub(crate) fn set_relay_problem(&self, problem: Option<String>) {
        if let Ok(mut slot) = self.relay_problem.lock() {
            *slot = problem;
        }
    }

    pub fn relay_problem(&self) -> Option<String> {
        self.relay_problem.lock().ok().and_then(|p| p.clone())
    }

    /// Records how late the relay sees the agent's files (see `relay_visibility`).
    pub(crate) fn set_relay_visibility(
        &self,
        measured: Option<(std::time::Duration, Option<String>)>,
    ) {
        if let Ok(mut slot) = self.relay_visibility.lock() {
            *slot = measured;
        }
    }

    /// How late the relay sees the agent's files, and the line telling it when that is late.
    pub fn relay_visibility(&self) -> Option<(std::time::Duration, Option<String>)> {
        self.relay_visibility.lock().ok().and_then(|v| v.clone())
    }

    /// What an agent's heartbeat said of Jira: while it is held, the agent's own class of why
    /// (one the hub does not know is `other`); Jira answering, or no class, forgets it.
    pub(crate) fn note_held_class(&self, agent: &str, jira_ok: bool, class: Option<&str>) {
        let Ok(mut classes) = self.held_classes.lock() else {
            return;
        };
        match class.filter(|_| !jira_ok) {
            Some(class) => {
                let known = HELD_CLASSES
                    .into_iter()
                    .find(|known| *known == class)
                    .unwrap_or("other");
                if classes.len() < HELD_CLASSES_KEPT || classes.contains_key(agent) {
                    classes.insert(agent.to_string(), known);
                }
            }
            None => {
                classes.remove(agent);
            }
        }
    }

    /// The class of why Jira is held for `agent`, as the agent said it, if it did.
    pub fn held_class(&self, agent: &str) -> Option<&'static str> {
        self.held_classes
            .lock()
            .ok()
            .and_then(|classes| classes.get(agent).copied())
    }

    /// Requests refused for want of a valid `credential` since the start.
    pub fn auth_failures(&self, credential: Credential) -> u64 {
        Self::get(&self.auth_failures[credential as usize])
    }

    /// A console sign-in with a wrong token: counted (the console writes its own summary, with
    /// the client that failed most).
    pub(crate) fn sign_in_failed(&self) {
        Self::add(&self.auth_failures[Credential::Console as usize], 1);
    }

    /// A request refused at `now` for want of a valid bearer `credential` (none, or a wrong
    /// one): counted, and summed up in the log in aggregate, never a line per request (a client
    /// with a stale token sends thousands): the first failure is told at once, the ones after
    /// it at most once a minute, with the count of each credential since the last line. Whether
    /// a line was written.
    pub(crate) fn bearer_failed(&self, credential: Credential, now: time::OffsetDateTime) -> bool {
        Self::add(&self.auth_failures[credential as usize], 1);
        let Ok(mut summary) = self.auth_summary.lock() else {
            return false;
        };
        summary.unlogged[credential as usize] += 1;
        Self::tell_bearer_failures(&mut summary, now, false)
    }

    /// Writes the summary of the bearer failures not yet told, when there are some and the
    /// last line is a minute old (the daemon's timers call it, so that the end of a burst is
    /// told without waiting for another failure). Whether a line was written.
    pub(crate) fn flush_bearer_failures(&self, now: time::OffsetDateTime) -> bool {
        match self.auth_summary.lock() {
            Ok(mut summary) => Self::tell_bearer_failures(&mut summary, now, true),
            Err(_) => false,
        }
    }

    fn tell_bearer_failures(
        summary: &mut AuthSummary,
        now: time::OffsetDateTime,
        flush: bool,
    ) -> bool {
        let unlogged = summary.unlogged;
        if unlogged.iter().all(|n| *n == 0)
            || summary
                .logged_at
                .is_some_and(|at| at + AUTH_SUMMARY_EVERY > now)
            || (flush && summary.logged_at.is_none())
        {
            return false;
        }
        let [client, agent, metrics, _] = unlogged;
        tracing::warn!(
            client,
            agent,
            metrics,
            "requests refused for a missing or wrong bearer token since the last summary (jira_hub_auth_failures_total counts them all)"
        );
        summary.unlogged = [0; Credential::ALL.len()];
        summary.logged_at = Some(now);
        true
    }
}

/// What `/metrics` shows of the database: taken by
/// `HubConnection::metrics_figures` on a connection of its own, never on a request's turn, and
/// kept by the HTTP side as its snapshot. The counts that walk a table (commands by status,
/// mirror issues, held runs) are taken again only when the database changed since; the rest
/// reads at most `store::AGENTS_LISTED` agents.
///
/// A family that needs the database is one more field here, filled in `metrics_figures` (in the
/// `recount` branch when it walks a table) and encoded in `http/ops.rs`'s collector; a counter
/// of what the process does is an atomic of `Metrics` instead.
#[derive(Debug, Clone, Default)]
pub struct MetricsFigures {
    /// Commands by status: every status the hub knows, zeros included.
    pub queue: Vec<(&'static str, i64)>,
    pub mirror_issues: i64,
    /// When the last full refresh finished; `None`: never.
    pub last_full_refresh_at: Option<Utc>,
    /// Full refreshes held by `prune_guard`, and the issues they would remove.
    pub held_runs: i64,
    pub issues_awaiting_removal: i64,
    /// Since when the oldest queued command has waited; `None`: nothing queued.
    pub oldest_queued_since: Option<Utc>,
    /// Commands not ended that their agent gave back with nothing sent to Jira, those give-backs
    /// in a row summed over them, and since when the oldest such run has lasted (their
    /// budget).
    pub uncounted_commands: i64,
    pub uncounted_releases: i64,
    pub oldest_uncounted_since: Option<Utc>,
    /// Commands `failed` now on a conflict with a change made in Jira (the other
    /// failed ones are the rest of `queue`'s `failed`).
    pub failed_conflicts: i64,
    /// Queued commands no agent seen so far can honour (an edit with a base passed over by
    /// agents that do not check bases).
    pub withheld_commands: i64,
    /// The agents listed, most recently seen first.
    pub agents: Vec<AgentFigures>,
    /// What keeps the database from being written now, if anything.
    pub database_fault: Option<super::Fault>,
    /// When the newest backup in `backups/` was made; `None`: there is none.
    pub last_backup_at: Option<time::OffsetDateTime>,
    /// The database's file and its WAL, in bytes.
    pub database_bytes: u64,
    /// The `data_version` at which the walking counts were taken.
    counted_at: Option<i64>,
}

/// One agent as `/metrics` shows it.
#[derive(Debug, Clone)]
pub struct AgentFigures {
    pub agent: String,
    pub last_seen_at: Utc,
    /// As the hub's one rule of silence judged it when the figures were taken.
    pub silent: bool,
    /// While Jira is held for it: the class of its reason ([`error_class`]) and since when.
    pub jira_held: Option<(&'static str, Utc)>,
    /// Its release, commit and protocol revision, as it last said (`?` for what it did not).
    pub version: String,
    pub commit: String,
    pub protocol: u32,
}

/// The class of an agent's reason for Jira being held, a bounded word for a label (the reason
/// itself is the agent's free text, and a label per distinct text is a series per text):
/// `credentials` (Jira refuses the agent's credentials), `unreachable` (no connection, or a
/// redirect the agent does not follow), `rate_limited`, `probe` (the agent's own check of Jira
/// failed), `other`. The words are the agent's own (`agent/answer.rs`, `agent/mod.rs`).
pub fn error_class(reason: &str) -> &'static str {
    // A refused login's words (`rejected_words` of the agent) are about credentials too.
    if reason.starts_with("Jira не принимает учётные данные")
        || reason.starts_with("Учётные данные отвергнуты")
    {
        "credentials"
    } else if reason.starts_with("Jira недоступна")
        || reason.starts_with("Jira отвечает перенаправлением")
    {
        "unreachable"
    } else if reason.starts_with("Jira ограничивает частоту") {
        "rate_limited"
    } else if reason.starts_with("serverInfo:") || reason.starts_with("myself:") {
        "probe"
    } else {
        "other"
    }
}

impl super::HubConnection {
    /// The figures of `/metrics` now; the walking counts of `previous` are kept when nothing
    /// was committed since they were taken (this connection must write nothing itself).
    pub fn metrics_figures(
        &self,
        previous: Option<&MetricsFigures>,
    ) -> super::Result<MetricsFigures> {
        let version = self.data_version()?;
        let mut figures = match previous {
            Some(previous) if previous.counted_at == Some(version) => previous.clone(),
            _ => {
                let stored = self.store.queue_counts()?;
                let held = self.held_runs()?;
                let uncounted = self.store.uncounted_give_backs()?;
                MetricsFigures {
                    // The statuses the hub knows, zeros included (a label per unknown stored
                    // status would be a series nobody asked for).
                    queue: super::QueueCount::every_status(
                        stored.iter().map(|q| (q.status.as_str(), q.commands)),
                    )
                    .into_iter()
                    .filter_map(|q| {
                        crate::domain::command::CommandStatus::parse(&q.status)
                            .map(|known| (known.as_str(), q.commands))
                    })
                    .collect(),
                    mirror_issues: self.store.count_rows("issue")?,
                    last_full_refresh_at: self
                        .store
                        .last_full_run()?
                        .and_then(|run| run.finished_at),
                    held_runs: held.len() as i64,
                    issues_awaiting_removal: held.iter().map(|h| h.would_remove).sum(),
                    oldest_queued_since: self.store.oldest_queued_since()?,
                    failed_conflicts: self.store.failed_on_conflict()?,
                    withheld_commands: self.store.withheld_commands()?,
                    uncounted_commands: uncounted.commands,
                    uncounted_releases: uncounted.releases,
                    oldest_uncounted_since: uncounted.oldest_since,
                    counted_at: Some(version),
                    ..MetricsFigures::default()
                }
            }
        };
        figures.agents = self
            .judged(
                self.store
                    .listed_agents()?
                    .into_iter()
                    .map(super::AgentView::from)
                    .collect(),
            )
            .into_iter()
            .map(|agent| AgentFigures {
                jira_held: agent.jira_down_since.as_ref().map(|since| {
                    (
                        self.metrics.held_class(&agent.agent).unwrap_or_else(|| {
                            error_class(agent.last_error.as_deref().unwrap_or_default())
                        }),
                        since.clone(),
                    )
                }),
                silent: agent.silent,
                version: agent.version.clone().unwrap_or_else(|| "?".into()),
                commit: agent.peer.commit.clone().unwrap_or_else(|| "?".into()),
                protocol: agent.peer.protocol,
                last_seen_at: agent.last_seen_at,
                agent: agent.agent,
            })
            .collect();
        figures.database_fault = self.database_fault().map(|seen| seen.fault);
        // Files, not rows: a backup or a growing WAL moves no `data_version`.
        figures.last_backup_at = self.store.newest_backup_at();
        figures.database_bytes = self.store.file_bytes();
        Ok(figures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 27,380 requests with a wrong token (what one client with a stale token sent in an
    /// afternoon) leave a count of each and a few summary lines, never a line each.
    #[test]
    fn a_burst_of_wrong_tokens_is_counted_and_summed_up_once_a_minute() {
        let metrics = Metrics::default();
        let start = time::macros::datetime!(2026-12-05 09:00:00 UTC);
        let mut lines = 0;
        for n in 0..27_380_i64 {
            // A request every 10 ms: 274 seconds of them.
            let now = start + time::Duration::milliseconds(n * 10);
            lines += usize::from(metrics.bearer_failed(Credential::Client, now));
        }
        assert_eq!(metrics.auth_failures(Credential::Client), 27_380);
        assert_eq!(metrics.auth_failures(Credential::Agent), 0);
        // The first at once, then one a minute: at 0, 60, 120, 180 and 240 s.
        assert_eq!(lines, 5);
        // The end of the burst is told by the timers once its minute is over, and only once.
        let end = start + time::Duration::seconds(274);
        assert!(!metrics.flush_bearer_failures(end));
        assert!(metrics.flush_bearer_failures(end + time::Duration::MINUTE));
        assert!(!metrics.flush_bearer_failures(end + time::Duration::HOUR));
        // Console sign-ins are counted here, summed up by the console's own line.
        metrics.sign_in_failed();
        assert_eq!(metrics.auth_failures(Credential::Console), 1);
        assert!(!metrics.flush_bearer_failures(end + time::Duration::DAY));
    }
}
