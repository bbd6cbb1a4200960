//! Read-only summaries for `jira-hub status`: the queue by status, the agents, the sync runs.

use super::{Result, Store};
use crate::domain::command::{RunKind, RunStatus};
use crate::domain::time::Utc;
use rusqlite::{OptionalExtension, Row};

pub(super) const RUN_COLUMNS: &str = "id, command_id, query, started_at, finished_at, status, issues_seen, issues_changed, error, full, kind, scope, pages, total, batch_id";

pub(super) fn run_from_row(row: &Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: row.get(0)?,
        command_id: row.get(1)?,
        query: row.get(2)?,
        started_at: row.get(3)?,
        finished_at: row.get(4)?,
        status: row.get(5)?,
        issues_seen: row.get(6)?,
        issues_changed: row.get(7)?,
        error: row.get(8)?,
        full: row.get(9)?,
        kind: row.get(10)?,
        scope: row.get(11)?,
        pages: row.get(12)?,
        total: row.get(13)?,
        batch_id: row.get(14)?,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueCount {
    pub status: String,
    pub commands: i64,
}

/// How many agents `status`, the console's overview and `/metrics` list at most, most recently
/// seen first (names come from whoever holds the agent token; old ones are pruned after
/// `AGENT_RETENTION` of the service).
pub(crate) const AGENTS_LISTED: i64 = 100;

/// An `agent_status` row; the service shows it as an `AgentView`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentRow {
    pub agent: String,
    pub version: Option<String>,
    pub last_seen_at: Utc,
    pub jira_ok: Option<bool>,
    pub last_error: Option<String>,
    /// The last preflight it sent (JSON text, revision 9), if any.
    pub last_check: Option<String>,
    /// Since when it has said Jira is held for it (`jira_ok: false` with the same
    /// `last_error`), while it does.
    pub jira_down_since: Option<Utc>,
    /// How often it said it sends a heartbeat, in seconds; `None` if it never said.
    pub heartbeat_seconds: Option<u32>,
    /// Only ever sent a preflight (`agent --check`): a check, never a claim for work nor a
    /// report.
    pub check_only: bool,
    /// What it said of itself with its last claim or heartbeat (JSON text, revision 15);
    /// `None` for the previous release's agents.
    pub peer: Option<String>,
}

/// The columns of an [`AgentRow`], in [`agent_row`]'s order.
pub(crate) const AGENT_COLUMNS: &str = "agent, version, last_seen_at, jira_ok, last_error, last_check, jira_down_since, heartbeat_seconds, \
     (last_check IS NOT NULL AND last_claim_at IS NULL AND last_report_at IS NULL), peer";

/// An [`AgentRow`] from the [`AGENT_COLUMNS`].
pub(crate) fn agent_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<AgentRow> {
    Ok(AgentRow {
        agent: row.get(0)?,
        version: row.get(1)?,
        last_seen_at: row.get(2)?,
        jira_ok: row.get::<_, Option<i64>>(3)?.map(|v| v != 0),
        last_error: row.get(4)?,
        last_check: row.get(5)?,
        jira_down_since: row.get(6)?,
        heartbeat_seconds: row
            .get::<_, Option<i64>>(7)?
            .and_then(|s| u32::try_from(s).ok())
            .filter(|s| *s > 0),
        check_only: row.get::<_, i64>(8)? != 0,
        peer: row.get(9)?,
    })
}

/// A `sync_run` row; the service shows it as a `SyncRunView`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunRow {
    pub id: i64,
    /// The refresh command the run executes.
    pub command_id: Option<i64>,
    pub query: String,
    pub started_at: Utc,
    pub finished_at: Option<Utc>,
    pub status: RunStatus,
    pub issues_seen: i64,
    pub issues_changed: i64,
    pub error: Option<String>,
    /// Whether the run's query was the base JQL when it started (`kind` is `Full`).
    pub full: bool,
    pub kind: RunKind,
    /// The query without its incremental clause.
    pub scope: String,
    /// Pages of issues received so far.
    pub pages: i64,
    /// How many issues Jira said the search has, when it said (Data Center does, Cloud does not).
    pub total: Option<i64>,
    /// The batch of the refresh command the run executes.
    pub batch_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatusCounts {
    pub queue: Vec<QueueCount>,
    pub agents: Vec<AgentRow>,
    pub issues: i64,
    pub notes: i64,
    pub batches: i64,
    /// Since when the oldest queued command has waited: its batch's creation, or its latest
    /// retry when an operator queued it again.
    pub oldest_queued_since: Option<Utc>,
    /// Commands not ended whose agent gave them back with nothing sent to Jira, the give-backs
    /// in a row summed over them, and since when the oldest such run has lasted.
    pub uncounted: Uncounted,
}

/// Commands given back uncounted (see [`Store::uncounted_give_backs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Uncounted {
    pub commands: i64,
    pub releases: i64,
    pub oldest_since: Option<Utc>,
}

impl Store {
    pub(crate) fn status_counts(&self) -> Result<StatusCounts> {
        Ok(StatusCounts {
            queue: self.queue_counts()?,
            agents: self.listed_agents()?,
            issues: self.count_rows("issue")?,
            notes: self.count_rows("issue_note")?,
            batches: self.count_rows("batch")?,
            oldest_queued_since: self.oldest_queued_since()?,
            uncounted: self.uncounted_give_backs()?,
        })
    }

    /// Commands not ended whose agent gave them back with nothing sent to Jira: how many, the
    /// give-backs in a row summed over them, and since when the oldest such run has lasted
    ///. Walks the queued and claimed commands only (the `command_status` index).
    pub(crate) fn uncounted_give_backs(&self) -> Result<Uncounted> {
        Ok(self.conn.query_row(
            "SELECT count(*), coalesce(sum(uncounted_releases), 0), min(uncounted_since)
             FROM command WHERE status IN ('queued', 'claimed') AND uncounted_releases > 0",
            [],
            |row| {
                Ok(Uncounted {
                    commands: row.get(0)?,
                    releases: row.get(1)?,
                    oldest_since: row.get(2)?,
                })
            },
        )?)
    }

    /// Commands by status (a walk of the `command_status` index: what `/metrics` refreshes only
    /// when the database changed, never per request).
    pub(crate) fn queue_counts(&self) -> Result<Vec<QueueCount>> {
        let mut statement = self.conn.prepare_cached(
            "SELECT status, count(*) FROM command GROUP BY status ORDER BY status",
        )?;
        let queue = statement
            .query_map([], |row| {
                Ok(QueueCount {
                    status: row.get(0)?,
                    commands: row.get(1)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(queue)
    }

    /// The [`AGENTS_LISTED`] agents most recently seen.
    pub(crate) fn listed_agents(&self) -> Result<Vec<AgentRow>> {
        let mut statement = self.conn.prepare_cached(&format!(
            "SELECT {AGENT_COLUMNS} FROM agent_status ORDER BY last_seen_at DESC, agent LIMIT ?1"
        ))?;
        let agents = statement
            .query_map([AGENTS_LISTED], agent_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(agents)
    }

    /// The rows of `table` (one of the hub's own names).
    pub(crate) fn count_rows(&self, table: &str) -> Result<i64> {
        Ok(self
            .conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
                row.get(0)
            })?)
    }

    /// Since when the oldest queued command has waited: its batch's creation, or its latest
    /// retry. Walks the queued commands only (`command_queued`), each retry looked up by its
    /// command (`command_attempt_command`), never every attempt.
    pub(crate) fn oldest_queued_since(&self) -> Result<Option<Utc>> {
        Ok(self.conn.query_row(
            "SELECT min(coalesce((SELECT max(a.retried_at) FROM command_attempt a
                                  WHERE a.command_id = c.id), b.created_at))
             FROM command c INDEXED BY command_queued JOIN batch b ON b.id = c.batch_id
             WHERE c.status = 'queued'",
            [],
            |row| row.get(0),
        )?)
    }

    /// The newest run of any kind that finished with status `done`.
    pub(crate) fn last_done_run(&self) -> Result<Option<RunRow>> {
        Ok(self
            .conn
            .query_row(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM sync_run WHERE status = 'done'
                     ORDER BY finished_at DESC, id DESC LIMIT 1"
                ),
                [],
                run_from_row,
            )
            .optional()?)
    }

    /// The newest full run that finished with status `done`.
    pub(crate) fn last_full_run(&self) -> Result<Option<RunRow>> {
        Ok(self
            .conn
            .query_row(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM sync_run WHERE full = 1 AND status = 'done'
                     ORDER BY finished_at DESC, id DESC LIMIT 1"
                ),
                [],
                run_from_row,
            )
            .optional()?)
    }
}
