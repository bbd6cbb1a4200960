//! What the operator's web console shows: the overview (queue, agents, relay folder, refreshes,
//! database, activity by hour), batch summaries, failed commands, issue counts per project.
//! Each is read on one snapshot through a few aggregate queries of `store`.

use super::batches::view_of;
use super::views::{AgentView, BatchView, CommandView, ProjectView, QueueCount, SyncRunView};
use super::{HubConnection, Result};
use crate::domain::command::{BatchStatus, CommandStatus};
use crate::domain::time::Utc;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use time::OffsetDateTime;

/// How many hours the overview's charts cover.
pub const OVERVIEW_HOURS: usize = 72;

/// An agent heard from longer ago than this (seconds) is silent. Agents talk every few seconds
/// while they work and at least every 10 minutes while they wait (a long-poll claim lasts up to
/// 600 s), so twice that is silence, not waiting.
pub const AGENT_SILENT_SECONDS: i64 = 20 * 60;

/// How many finished runs the chart of refresh durations shows.
const RECENT_RUNS: i64 = 30;

/// The console's first page.
#[derive(Debug, Clone)]
pub struct Overview {
    /// The hub's time when it was read.
    pub now: Utc,
    /// Commands per status, every status the hub knows (zeros included) then any other stored.
    pub queue: Vec<QueueCount>,
    /// Since when the oldest queued command has waited (its batch's creation, or its retry).
    pub oldest_queued_at: Option<Utc>,
    pub agents: Vec<AgentView>,
    pub relay: RelayState,
    /// The newest full run that succeeded.
    pub last_full_refresh: Option<SyncRunView>,
    /// Runs in progress, oldest first.
    pub running: Vec<SyncRunView>,
    /// For each run of `running`, when the agent last sent something for it (a page, or the
    /// claim itself): its refresh command's lease, which every result renews.
    pub running_moved_at: Vec<Option<Utc>>,
    /// Full runs whose removals wait for a confirmation.
    pub held_runs: Vec<super::HeldRunView>,
    /// The newest runs (finished or not), newest first, for the chart of durations.
    pub recent_runs: Vec<SyncRunView>,
    pub issues: i64,
    /// The database's pages, in bytes.
    pub database_bytes: u64,
    /// The write-ahead log beside it, in bytes (0 when there is none).
    pub wal_bytes: u64,
    pub last_backup: Option<BackupFile>,
    /// The last [`OVERVIEW_HOURS`] hours, oldest first, the current hour last.
    pub hours: Vec<HourActivity>,
    /// Refreshes waiting in the queue, oldest first.
    pub queued_refreshes: Vec<QueuedRefresh>,
}

/// A refresh waiting in the queue: its batch (a refresh is a batch with a run), where it stands
/// and whether an agent is about to take it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedRefresh {
    pub batch_id: i64,
    pub command_id: i64,
    /// The query it will run.
    pub jql: String,
    /// Its place in the queue as claims take it: 1 is next.
    pub position: i64,
    /// Since when it waits (its batch's creation).
    pub queued_at: Utc,
    /// No agent has been heard from recently: nobody will take it until one comes.
    pub no_agent: bool,
}

/// A command with everything its page shows.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandPage {
    /// With its earlier attempts.
    pub command: CommandView,
    pub batch_title: String,
    pub batch_cancelled: bool,
    /// The command this one takes its `$result` from.
    pub dependency: Option<CommandView>,
    /// The commands of the batch that take theirs from this one.
    pub dependents: Vec<CommandView>,
    /// The run of a refresh command.
    pub run: Option<SyncRunView>,
    /// Issue keys its params and result name, and whether the mirror has each.
    pub keys: Vec<(String, bool)>,
}

/// One hour of the queue's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HourActivity {
    /// The hour's start.
    pub start: OffsetDateTime,
    /// Commands that reached a terminal status in the hour (any: the queue's depth follows them).
    pub finished: i64,
    /// Of them, those that succeeded (`done`, `confirmed_by_state`): what «Выполнено» counts.
    pub done: i64,
    /// Jira's 429 answers those commands met.
    pub rate_limited: i64,
    /// The pauses the hub asked for before them, in seconds.
    pub pause_seconds: i64,
    /// The most commands queued or claimed at once in the hour (so far, for the current hour):
    /// its peak, not its end, so a peak stays on the chart once the queue drains. Derived from
    /// the enqueue times (their batch's) and finishing times, second by second.
    pub queue_depth: i64,
}

/// The relay folder as the overview shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayState {
    /// `relay_dir` is not set: the agent uses HTTP only.
    NotSet,
    /// The folder or its `inbox/` is not there (the share not mounted).
    Missing { dir: String },
    /// The relay does not use it (a folder of the share is a link).
    Unusable { dir: String, problem: String },
    Present {
        dir: String,
        /// Files in `inbox/` not yet handled (claims waiting for work are not counted).
        waiting: usize,
        /// Claims of agents waiting in `inbox/` for work, as `status` shows them apart.
        claims_waiting: usize,
        /// Files refused into `rejected/` since midnight UTC.
        refused_today: usize,
        /// How late the relay sees the agent's files, and the line telling it when late.
        visibility: Option<(std::time::Duration, Option<String>)>,
    },
}

/// The newest backup in `backups/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupFile {
    pub name: String,
    pub modified: Utc,
    pub bytes: u64,
}

/// A batch's `failed` and `skipped` commands, with its title and project.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedBatch {
    pub id: i64,
    pub title: String,
    pub project: Option<String>,
    /// Whether the batch was cancelled (its commands are never retried).
    pub cancelled: bool,
    /// Its commands still queued or claimed (the batch can be cancelled while there are any).
    pub open_commands: i64,
    /// Newest first, each with its earlier attempts.
    pub commands: Vec<CommandView>,
    /// The commands of the batch that skipped ones depend on, when not listed themselves
    /// (without attempts): whether a skipped command can be retried depends on them.
    pub dependencies: Vec<CommandView>,
}

/// A project with how many issues of the mirror carry its label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectIssues {
    pub project: ProjectView,
    pub issues: i64,
}

/// Queued refresh rows as the console shows them; nobody takes them while no agent is about.
fn queued_refreshes(
    rows: Vec<(crate::store::CommandRow, i64, Utc)>,
    agents: &[AgentView],
) -> Vec<QueuedRefresh> {
    // Every agent silent (two of its heartbeat periods without a request of its own), or none.
    let no_agent = agents.iter().all(|a| a.silent || a.check_only);
    rows.into_iter()
        .map(|(row, position, queued_at)| QueuedRefresh {
            batch_id: row.batch_id,
            command_id: row.id,
            jql: row.params["jql"].as_str().unwrap_or_default().to_string(),
            position,
            queued_at,
            no_agent,
        })
        .collect()
}

/// The issue keys a command's params or result name (`key`, `keys`, `epic_key`, `created`…),
/// each once, in the order met.
fn issue_keys(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(text)
            if crate::domain::command::is_issue_key(text) && !out.contains(text) =>
        {
            out.push(text.clone());
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| issue_keys(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| issue_keys(v, out)),
        _ => {}
    }
}

/// Each hour's peak of the queue (queued or claimed commands): the depth at the window's start
/// is what is open now, less what was enqueued since, plus what finished since; then, second by
/// second, a second's enqueues (its peak) before its finishes.
fn queue_peaks(hours: &mut [HourActivity], open_now: i64, moves: &[crate::store::QueueMove]) {
    let enqueued: i64 = moves.iter().map(|m| m.enqueued).sum();
    let finished: i64 = moves.iter().map(|m| m.finished).sum();
    let mut depth = open_now - enqueued + finished;
    let mut moves = moves.iter().peekable();
    for hour in hours.iter_mut() {
        let key = hour_key(hour.start);
        let mut peak = depth;
        while let Some(m) = moves.next_if(|m| m.second.get(..13).is_some_and(|h| h <= key.as_str()))
        {
            depth += m.enqueued;
            peak = peak.max(depth);
            depth -= m.finished;
        }
        hour.queue_depth = peak.max(0);
    }
}

/// The first 13 characters of a stored time, `2026-11-30T03`, for an hour's start.
fn hour_key(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour()
    )
}

fn start_of_hour(at: OffsetDateTime) -> OffsetDateTime {
    let at = at.to_offset(time::UtcOffset::UTC);
    at.replace_time(time::Time::from_hms(at.hour(), 0, 0).unwrap_or(time::Time::MIDNIGHT))
}

/// Entries of a folder whose names do not start with `.`, with their metadata.
fn visible_entries(dir: &Path) -> Vec<(String, std::fs::Metadata)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(std::result::Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                return None;
            }
            Some((name, entry.metadata().ok()?))
        })
        .collect()
}

impl HubConnection {
    /// The console's overview: the queue, agents and runs from the database, the relay folder
    /// as the relay's last pass found it, the last backup from `backups/`.
    pub fn overview(&mut self) -> Result<Overview> {
        let now = self.clock.now();
        let this_hour = start_of_hour(now);
        let first_hour = this_hour - time::Duration::hours(OVERVIEW_HOURS as i64 - 1);
        let since = Utc::new(first_hour);
        let settings = self.settings()?;
        let last_full_refresh = self.store.last_full_run()?.map(SyncRunView::from);
        let counts = self.store.status_counts()?;
        let read = self.store.read(|tx| -> Result<_> {
            let running = tx.running_runs()?;
            let mut moved = Vec::with_capacity(running.len());
            for run in &running {
                let command = match run.command_id {
                    Some(id) => tx.command(id)?,
                    None => None,
                };
                moved.push(command.and_then(|c| c.lease_at.or(c.claimed_at)));
            }
            Ok((
                (running, moved),
                tx.runs(RECENT_RUNS)?,
                tx.page_counts()?,
                tx.finished_per_hour(&since)?,
                tx.queue_moves_since(&since)?,
                tx.queued_refreshes()?,
            ))
        })?;
        let ((running, running_moved_at), recent, pages, finished, moves, refreshes) = read;
        let agents: Vec<AgentView> =
            self.judged(counts.agents.into_iter().map(AgentView::from).collect());
        let queued_refreshes = queued_refreshes(refreshes, &agents);

        let stored = counts.queue.iter().map(|q| (q.status.as_str(), q.commands));
        let queue = QueueCount::every_status(stored);
        let open_now: i64 = queue
            .iter()
            .filter(|q| q.status == "queued" || q.status == "claimed")
            .map(|q| q.commands)
            .sum();

        let finished: HashMap<String, _> =
            finished.into_iter().map(|h| (h.hour.clone(), h)).collect();
        let mut hours: Vec<HourActivity> = (0..OVERVIEW_HOURS)
            .map(|i| {
                let start = first_hour + time::Duration::hours(i as i64);
                let key = hour_key(start);
                let done = finished.get(&key);
                HourActivity {
                    start,
                    finished: done.map_or(0, |h| h.commands),
                    done: done.map_or(0, |h| h.done),
                    rate_limited: done.map_or(0, |h| h.rate_limited),
                    pause_seconds: done.map_or(0, |h| h.pause_seconds),
                    queue_depth: 0,
                }
            })
            .collect();
        queue_peaks(&mut hours, open_now, &moves);

        let wal_bytes = std::fs::metadata(format!("{}-wal", self.store.path().display()))
            .map_or(0, |m| m.len());
        Ok(Overview {
            now: Utc::new(now),
            queue,
            oldest_queued_at: counts.oldest_queued_since,
            agents,
            relay: self.relay_state(settings.relay_dir, now),
            last_full_refresh,
            running: running.into_iter().map(SyncRunView::from).collect(),
            running_moved_at,
            held_runs: self.held_runs()?,
            recent_runs: recent.into_iter().map(SyncRunView::from).collect(),
            issues: counts.issues,
            database_bytes: (pages.pages.max(0) as u64) * (pages.page_size.max(0) as u64),
            wal_bytes,
            last_backup: self.last_backup(),
            hours,
            queued_refreshes,
        })
    }

    /// The refreshes waiting in the queue, for the runs page.
    pub fn queued_refreshes(&mut self) -> Result<Vec<QueuedRefresh>> {
        let agents = self.agents()?;
        let rows = self.store.read(|tx| tx.queued_refreshes())?;
        Ok(queued_refreshes(rows, &agents))
    }

    /// A command's page: the command with its attempts, its batch's title, what it depends on
    /// and what depends on it, its run (a refresh), the issue keys it names.
    pub fn command_page(&mut self, id: i64) -> Result<CommandPage> {
        let (command, batch, dependency, dependents, run, keys) =
            self.store.read(|tx| -> Result<_> {
                let row = tx
                    .command(id)?
                    .ok_or_else(|| super::ServiceError::NotFound(format!("Команды {id} нет")))?;
                let attempts = tx.attempts_of(id)?;
                let batch = tx.batch(row.batch_id)?;
                let dependency = match row.depends_on {
                    Some(d) => tx.command(d)?.map(CommandView::from),
                    None => None,
                };
                let dependents: Vec<CommandView> = tx
                    .dependents(id)?
                    .into_iter()
                    .map(CommandView::from)
                    .collect();
                let run = tx.last_run_of_command(id)?;
                let command = CommandView::with_attempts(row, attempts);
                let mut named = Vec::new();
                issue_keys(&command.params, &mut named);
                let results = std::iter::once(&command.result)
                    .chain(command.attempts.iter().map(|a| &a.result));
                for result in results.flatten() {
                    issue_keys(result, &mut named);
                }
                let mut keys = Vec::with_capacity(named.len());
                for key in named {
                    let present = tx.issue(&key)?.is_some();
                    keys.push((key, present));
                }
                Ok((command, batch, dependency, dependents, run, keys))
            })?;
        Ok(CommandPage {
            batch_title: batch.as_ref().map(|b| b.title.clone()).unwrap_or_default(),
            batch_cancelled: batch.is_some_and(|b| b.cancelled_at.is_some()),
            command,
            dependency,
            dependents,
            run: run.map(SyncRunView::from),
            keys,
        })
    }

    /// The relay folder as the relay saw it on its last pass: nothing here reads the share, so a
    /// share that hangs never holds a request (the relay's own liveness shows in `/ready`).
    fn relay_state(&self, relay_dir: Option<String>, now: OffsetDateTime) -> RelayState {
        let Some(dir) = relay_dir else {
            return RelayState::NotSet;
        };
        if self.metrics.relay_missing.load(Ordering::Relaxed) {
            return RelayState::Missing { dir };
        }
        if let Some(problem) = self.metrics.relay_problem() {
            return RelayState::Unusable { dir, problem };
        }
        RelayState::Present {
            dir,
            waiting: self.metrics.relay_files_waiting.load(Ordering::Relaxed) as usize,
            claims_waiting: self.metrics.claims_waiting_relay.load(Ordering::Relaxed) as usize,
            refused_today: self
                .metrics
                .refused_on(now.to_offset(time::UtcOffset::UTC).date())
                as usize,
            visibility: self.metrics.relay_visibility(),
        }
    }

    /// The newest file in `backups/`, by modification time.
    fn last_backup(&self) -> Option<BackupFile> {
        visible_entries(&self.store.backups_dir())
            .into_iter()
            .filter(|(name, meta)| meta.is_file() && name.ends_with(".sqlite"))
            .filter_map(|(name, meta)| Some((name, meta.modified().ok()?, meta.len())))
            .max_by_key(|(_, modified, _)| *modified)
            .map(|(name, modified, bytes)| BackupFile {
                name,
                modified: Utc::new(OffsetDateTime::from(modified)),
                bytes,
            })
    }

    /// The newest batches (at most `limit`, of one project when given) with their counters
    /// and without their commands; only those of `status` when given.
    pub fn batch_summaries(
        &mut self,
        project: Option<&str>,
        status: Option<BatchStatus>,
        limit: i64,
    ) -> Result<Vec<BatchView>> {
        self.batch_summaries_before(project, status, None, limit)
    }

    /// [`HubConnection::batch_summaries`] older than batch `before` (a smaller id), when given:
    /// the next page of a list that ended with `before`.
    pub fn batch_summaries_before(
        &mut self,
        project: Option<&str>,
        status: Option<BatchStatus>,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<BatchView>> {
        self.store.read(|tx| {
            let mut summaries = Vec::new();
            for batch in tx.batches(project, before, limit)? {
                let mut statuses = Vec::new();
                for (stored, n) in tx.batch_status_counts(batch.id)? {
                    // An unknown stored status reads as failed, as a command row does.
                    let status = CommandStatus::parse(&stored).unwrap_or(CommandStatus::Failed);
                    statuses.extend(std::iter::repeat_n(status, n.max(0) as usize));
                }
                let conflicts = tx.batch_conflicts(batch.id)?;
                let mut view = view_of(batch, &statuses, Vec::new());
                view.conflicts = usize::try_from(conflicts).unwrap_or(0);
                if status.is_none_or(|wanted| wanted == view.status) {
                    summaries.push(view);
                }
            }
            Ok(summaries)
        })
    }

    /// The newest `failed` and `skipped` commands (at most `limit`, see
    /// [`HubConnection::failed_commands`]) by batch, the batch of the newest first.
    pub fn failed_by_batch(&mut self, limit: i64) -> Result<Vec<FailedBatch>> {
        let commands = self.failed_commands(limit)?;
        self.store.read(|tx| {
            let mut batches: Vec<FailedBatch> = Vec::new();
            for command in commands {
                if let Some(batch) = batches.iter_mut().find(|b| b.id == command.batch_id) {
                    batch.commands.push(command);
                    continue;
                }
                let Some(row) = tx.batch(command.batch_id)? else {
                    continue;
                };
                let open_commands = tx
                    .batch_status_counts(row.id)?
                    .into_iter()
                    .filter(|(status, _)| status == "queued" || status == "claimed")
                    .map(|(_, n)| n)
                    .sum();
                batches.push(FailedBatch {
                    cancelled: row.cancelled_at.is_some(),
                    open_commands,
                    id: row.id,
                    title: row.title,
                    project: row.project,
                    commands: vec![command],
                    dependencies: Vec::new(),
                });
            }
            for batch in &mut batches {
                let wanted: Vec<i64> = batch
                    .commands
                    .iter()
                    .filter_map(|c| c.depends_on)
                    .filter(|d| !batch.commands.iter().any(|c| c.id == *d))
                    .collect();
                for id in wanted {
                    if !batch.dependencies.iter().any(|c| c.id == id)
                        && let Some(row) = tx.command(id)?
                    {
                        batch.dependencies.push(CommandView::from(row));
                    }
                }
            }
            Ok(batches)
        })
    }

    /// Every project with the number of issues of the mirror that carry its label, and the
    /// number of issues in the mirror.
    pub fn project_issue_counts(&mut self) -> Result<(Vec<ProjectIssues>, i64)> {
        self.store.read(|tx| {
            let projects = tx.projects()?;
            let labels: Vec<&str> = projects.iter().map(|p| p.label.as_str()).collect();
            let counts = tx.issue_counts_by_label(&labels)?;
            let total = tx.issue_count()?;
            Ok((
                projects
                    .into_iter()
                    .zip(counts)
                    .map(|(project, issues)| ProjectIssues {
                        project: project.into(),
                        issues,
                    })
                    .collect(),
                total,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn hours_are_keyed_like_stored_times() {
        let at = datetime!(2026-11-30 03:42:10.5 +03:00);
        assert_eq!(hour_key(at), "2026-11-30T00");
        assert_eq!(hour_key(start_of_hour(at)), "2026-11-30T00");
        assert_eq!(start_of_hour(at), datetime!(2026-11-30 00:00 UTC));
    }
}
