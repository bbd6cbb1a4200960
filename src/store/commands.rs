//! The `batch` and `command` tables.

use super::tx::{Tx, json_column};
use super::{Result, StoreError};
use crate::domain::command::{CommandStatus, CommandType};
use crate::domain::time::Utc;
use rusqlite::{OptionalExtension, Row, params};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BatchRow {
    pub id: i64,
    pub title: String,
    pub author: String,
    pub created_at: Utc,
    pub cancelled_at: Option<Utc>,
    pub estimate_seconds: Option<i64>,
    pub project: Option<String>,
}

/// A `command` row; the service shows it as a `CommandView`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommandRow {
    pub id: i64,
    pub batch_id: i64,
    pub seq: i64,
    pub command_type: CommandType,
    /// As enqueued: `$result` references are filled in only when handed out.
    pub params: Value,
    pub status: CommandStatus,
    /// The time of the last delivery (data model); a progress page does not move it.
    pub claimed_at: Option<Utc>,
    /// When the lease of a claimed command was last renewed (its claim or any result); the claim
    /// timeout counts from here.
    pub lease_at: Option<Utc>,
    /// The agent that claimed it last.
    pub claimed_by: Option<String>,
    pub deliveries: u32,
    /// The hub's time (UTC) when the command reached its terminal status.
    pub finished_at: Option<Utc>,
    /// The finishing time the agent reported, in UTC: the agent's clock, shown only.
    pub agent_finished_at: Option<Utc>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub jira_calls: i64,
    pub rate_limited: i64,
    pub pause_seconds: i64,
    /// The id of the command whose result this one uses.
    pub depends_on: Option<i64>,
    /// A command its agent gave back (`released`, revision 7): not handed out before this time.
    pub not_before: Option<Utc>,
    /// Give-backs in a row with nothing sent to Jira (`released` with `sent: false`, revision
    /// 13), and when the first of them came; reset by a counted delivery given back.
    pub uncounted_releases: u32,
    pub uncounted_since: Option<Utc>,
    /// The call the last give-back was refused on (`released` with `refused`, revision 14), as
    /// JSON text; rewritten by every give-back.
    pub released_refusal: Option<String>,
    /// Why the queued command waits for another agent (revision 15): a claim passed it over
    /// because its agent cannot honour it. Cleared when it is claimed.
    pub withheld: Option<String>,
}

/// How a give-back (`released`) counts against the command's budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GiveBack {
    /// A write of it may have reached Jira: the delivery counts against `max_deliveries`.
    Counted,
    /// The agent ran it, called Jira and sent nothing: one more of the uncounted run.
    Uncounted,
    /// The agent never called Jira for it (given back with the rest of a claim, held): it
    /// counts against nothing.
    Unstarted,
}

/// How many columns [`COMMAND_COLUMNS`] names: a query's own columns come after them.
pub(super) const COMMAND_COLUMN_COUNT: usize = 23;

pub(super) const COMMAND_COLUMNS: &str = "c.id, c.batch_id, c.seq, c.type, c.params, c.status, c.claimed_at, c.deliveries, \
     c.finished_at, c.result, c.error, c.jira_calls, c.rate_limited, c.pause_seconds, c.depends_on, \
     c.lease_at, c.claimed_by, c.agent_finished_at, c.not_before, c.uncounted_releases, c.uncounted_since, \
     c.released_refusal, c.withheld";

pub(super) fn command_from_row(row: &Row<'_>) -> rusqlite::Result<CommandRow> {
    let status: String = row.get(5)?;
    Ok(CommandRow {
        id: row.get(0)?,
        batch_id: row.get(1)?,
        seq: row.get(2)?,
        command_type: row.get(3)?,
        params: json_column(row.get(4)?).unwrap_or(Value::Null),
        // An unknown status (hand-edited) reads as failed: terminal, never handed out.
        status: CommandStatus::parse(&status).unwrap_or(CommandStatus::Failed),
        claimed_at: row.get(6)?,
        deliveries: row.get(7)?,
        finished_at: row.get(8)?,
        result: json_column(row.get(9)?),
        error: row.get(10)?,
        jira_calls: row.get(11)?,
        rate_limited: row.get(12)?,
        pause_seconds: row.get(13)?,
        depends_on: row.get(14)?,
        lease_at: row.get(15)?,
        claimed_by: row.get(16)?,
        agent_finished_at: row.get(17)?,
        not_before: row.get(18)?,
        uncounted_releases: row.get(19)?,
        uncounted_since: row.get(20)?,
        released_refusal: row.get(21)?,
        withheld: row.get(22)?,
    })
}

fn batch_from_row(row: &Row<'_>) -> rusqlite::Result<BatchRow> {
    Ok(BatchRow {
        id: row.get(0)?,
        title: row.get(1)?,
        author: row.get(2)?,
        created_at: row.get(3)?,
        cancelled_at: row.get(4)?,
        estimate_seconds: row.get(5)?,
        project: row.get(6)?,
    })
}

/// An earlier attempt of a command an operator queued again: how it ended then.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AttemptRow {
    pub command_id: i64,
    pub status: CommandStatus,
    /// The command's delivery count when it was retried.
    pub deliveries: u32,
    pub claimed_at: Option<Utc>,
    pub claimed_by: Option<String>,
    pub finished_at: Option<Utc>,
    pub agent_finished_at: Option<Utc>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub retried_at: Utc,
}

const ATTEMPT_COLUMNS: &str = "a.command_id, a.status, a.deliveries, a.claimed_at, a.claimed_by, \
     a.finished_at, a.agent_finished_at, a.result, a.error, a.retried_at";

fn attempt_from_row(row: &Row<'_>) -> rusqlite::Result<AttemptRow> {
    let status: String = row.get(1)?;
    Ok(AttemptRow {
        command_id: row.get(0)?,
        status: CommandStatus::parse(&status).unwrap_or(CommandStatus::Failed),
        deliveries: row.get(2)?,
        claimed_at: row.get(3)?,
        claimed_by: row.get(4)?,
        finished_at: row.get(5)?,
        agent_finished_at: row.get(6)?,
        result: json_column(row.get(7)?),
        error: row.get(8)?,
        retried_at: row.get(9)?,
    })
}

const BATCH_COLUMNS: &str =
    "id, title, author, created_at, cancelled_at, estimate_seconds, project";

/// What a finished command records.
pub(crate) struct Finish<'a> {
    pub status: CommandStatus,
    pub finished_at: &'a Utc,
    /// The command's result as JSON text.
    pub result: Option<&'a str>,
    pub error: Option<&'a str>,
    /// The agent's own finishing time (UTC), when an agent's result ended it.
    pub agent_finished_at: Option<&'a Utc>,
}

impl Tx<'_> {
    pub(crate) fn insert_batch(
        &self,
        title: &str,
        author: &str,
        created_at: &Utc,
        estimate_seconds: i64,
        project: Option<&str>,
    ) -> Result<i64> {
        self.0.execute(
            concat!(
                "INSERT INTO batch (id, title, author, created_at, estimate_seconds, project) VALUES (",
                super::next_id!("batch"),
                ", ?1, ?2, ?3, ?4, ?5)"
            ),
            params![title, author, created_at, estimate_seconds, project],
        )?;
        Ok(self.0.last_insert_rowid())
    }

    pub(crate) fn insert_command(
        &self,
        batch_id: i64,
        seq: i64,
        command_type: CommandType,
        params: &Value,
        depends_on: Option<i64>,
    ) -> Result<i64> {
        self.0
            .prepare_cached(concat!(
                "INSERT INTO command (id, batch_id, seq, type, params, status, depends_on) VALUES (",
                super::next_id!("command"),
                ", ?1, ?2, ?3, ?4, 'queued', ?5)"
            ))?
            .execute(params![
                batch_id,
                seq,
                command_type.as_str(),
                params.to_string(),
                depends_on
            ])?;
        Ok(self.0.last_insert_rowid())
    }

    pub(crate) fn batch(&self, id: i64) -> Result<Option<BatchRow>> {
        Ok(self
            .0
            .query_row(
                &format!("SELECT {BATCH_COLUMNS} FROM batch WHERE id = ?1"),
                [id],
                batch_from_row,
            )
            .optional()?)
    }

    /// Batches, newest first; of one project when `project` is given; only those older (of a
    /// smaller id) than `before` when given.
    pub(crate) fn batches(
        &self,
        project: Option<&str>,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<BatchRow>> {
        let mut statement = self.0.prepare(&format!(
            "SELECT {BATCH_COLUMNS} FROM batch WHERE (?1 IS NULL OR project = ?1) AND (?2 IS NULL OR id < ?2)
             ORDER BY id DESC LIMIT ?3"
        ))?;
        let rows = statement.query_map(params![project, before, limit], batch_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn commands_of_batch(&self, batch_id: i64) -> Result<Vec<CommandRow>> {
        let mut statement = self.0.prepare_cached(&format!(
            "SELECT {COMMAND_COLUMNS} FROM command c WHERE c.batch_id = ?1 ORDER BY c.seq"
        ))?;
        let rows = statement.query_map([batch_id], command_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn command(&self, id: i64) -> Result<Option<CommandRow>> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT {COMMAND_COLUMNS} FROM command c WHERE c.id = ?1"
            ))?
            .query_row([id], command_from_row)
            .optional()?)
    }

    /// Walks the queued commands in claim order (oldest batch by `created_at` then id, then
    /// `seq`) until `visit` says stop. Lazy: a claim of a few commands does not read the whole
    /// queue. Every batch with queued commands has an id at least the smallest such id (one
    /// look in the partial index `command_queued`), so only the batches from there on are
    /// ordered (batch rows, not commands), and each one's queued commands come in `seq` order
    /// from the same index. `INDEXED BY`: without statistics the planner would take
    /// `command_status` and read every queued row.
    pub(crate) fn visit_queued(
        &self,
        mut visit: impl FnMut(CommandRow) -> Result<bool>,
    ) -> Result<()> {
        let first: Option<i64> = self
            .0
            .prepare_cached(
                "SELECT min(batch_id) FROM command INDEXED BY command_queued WHERE status = 'queued'",
            )?
            .query_row([], |row| row.get(0))?;
        let Some(first) = first else {
            return Ok(());
        };
        let mut batches = self
            .0
            .prepare_cached("SELECT id FROM batch WHERE id >= ?1 ORDER BY created_at, id")?;
        let mut batch_rows = batches.query([first])?;
        let mut commands = self.0.prepare_cached(&format!(
            "SELECT {COMMAND_COLUMNS} FROM command c INDEXED BY command_queued
             WHERE c.batch_id = ?1 AND c.status = 'queued' ORDER BY c.seq"
        ))?;
        while let Some(batch) = batch_rows.next()? {
            let batch_id: i64 = batch.get(0)?;
            let mut rows = commands.query([batch_id])?;
            while let Some(row) = rows.next()? {
                if !visit(command_from_row(row)?)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Every claimed command (few: at most what the agents hold).
    pub(crate) fn claimed_commands(&self) -> Result<Vec<CommandRow>> {
        let mut statement = self.0.prepare_cached(&format!(
            "SELECT {COMMAND_COLUMNS} FROM command c WHERE c.status = 'claimed' ORDER BY c.id"
        ))?;
        let rows = statement.query_map([], command_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Hands a command out: claimed, `claimed_at` and a new lease, one more delivery, who took
    /// it, the pause it goes with.
    pub(crate) fn mark_claimed(
        &self,
        id: i64,
        claimed_at: &Utc,
        agent: &str,
        pause_seconds: u32,
    ) -> Result<()> {
        self.0
            .prepare_cached(
                "UPDATE command SET status = 'claimed', claimed_at = ?2, lease_at = ?2, claimed_by = ?3,
                 deliveries = deliveries + 1, pause_seconds = ?4, not_before = NULL, withheld = NULL
                 WHERE id = ?1",
            )?
            .execute(params![id, claimed_at, agent, pause_seconds])?;
        Ok(())
    }

    /// Says why a queued command waits for another agent (`None`: it no longer does).
    pub(crate) fn set_withheld(&self, id: i64, why: Option<&str>) -> Result<()> {
        self.0
            .prepare_cached("UPDATE command SET withheld = ?2 WHERE id = ?1")?
            .execute(params![id, why])?;
        Ok(())
    }

    /// A report shows the agent still works on it: claimed again (if a timeout had re-queued
    /// it), with a fresh lease. `claimed_at`, the time of the delivery, stays.
    pub(crate) fn renew_lease(&self, id: i64, now: &Utc) -> Result<()> {
        self.0
            .prepare_cached("UPDATE command SET status = 'claimed', lease_at = ?2 WHERE id = ?1")?
            .execute(params![id, now])?;
        Ok(())
    }

    pub(crate) fn add_jira_counts(
        &self,
        id: i64,
        jira_calls: u32,
        rate_limited: u32,
    ) -> Result<()> {
        let changed = self
            .0
            .prepare_cached(
                "UPDATE command SET jira_calls = jira_calls + ?2, rate_limited = rate_limited + ?3 WHERE id = ?1",
            )?
            .execute(params![id, jira_calls, rate_limited])?;
        if changed == 1 {
            self.1.borrow_mut().jira(jira_calls, rate_limited);
        }
        Ok(())
    }

    /// Moves a command to a terminal status. Refuses (an internal error) to touch one that is
    /// terminal already: terminal statuses never change.
    pub(crate) fn finish_command(&self, id: i64, finish: &Finish<'_>) -> Result<()> {
        let kinds = self
            .0
            .prepare_cached(
                "UPDATE command SET status = ?2, finished_at = ?3, result = coalesce(?4, result), error = ?5,
                 agent_finished_at = ?6
                 WHERE id = ?1 AND status IN ('queued', 'claimed') RETURNING type",
            )?
            .query_map(
                params![
                    id,
                    finish.status.as_str(),
                    finish.finished_at,
                    finish.result,
                    finish.error,
                    finish.agent_finished_at
                ],
                |row| row.get::<_, String>(0),
            )?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let [kind] = kinds.as_slice() else {
            return Err(StoreError::Incompatible(format!(
                "command {id} is already finished"
            )));
        };
        self.1.borrow_mut().finished(finish.status, kind);
        Ok(())
    }

    /// Puts a claimed command back in the queue (its report never came).
    pub(crate) fn requeue(&self, id: i64) -> Result<()> {
        self.0
            .prepare_cached(
                "UPDATE command SET status = 'queued' WHERE id = ?1 AND status = 'claimed'",
            )?
            .execute([id])?;
        Ok(())
    }

    /// A claimed command its agent gave back (`released`): queued again, not handed out before
    /// `not_before`; `lease_at` keeps the time it was given back (the next delivery is told how
    /// long ago), `error` the agent's reason until an outcome replaces it. A give-back that is
    /// not [`GiveBack::Counted`] (the agent sent nothing of it to Jira) takes the delivery back:
    /// the next one has its number. Only [`GiveBack::Uncounted`] adds to the run of uncounted
    /// give-backs (and starts its age); [`GiveBack::Unstarted`] keeps the run's count and
    /// restarts its age (the command was not being run meanwhile); a counted one ends the run.
    /// `refusal`: the call refused on one path, as JSON (see [`CommandRow::released_refusal`]).
    /// Returns false when the command was not claimed.
    pub(crate) fn release_command(
        &self,
        id: i64,
        now: &Utc,
        not_before: &Utc,
        reason: &str,
        give_back: GiveBack,
        refusal: Option<&str>,
    ) -> Result<bool> {
        let (counted, uncounted) = match give_back {
            GiveBack::Counted => (true, false),
            GiveBack::Uncounted => (false, true),
            GiveBack::Unstarted => (false, false),
        };
        let changed = self
            .0
            .prepare_cached(
                "UPDATE command SET status = 'queued', lease_at = ?2, not_before = ?3, error = ?4,
                 released_refusal = ?6,
                 deliveries = CASE WHEN ?5 OR deliveries = 0 THEN deliveries ELSE deliveries - 1 END,
                 uncounted_releases = CASE WHEN ?5 THEN 0 WHEN ?7 THEN uncounted_releases + 1
                                      ELSE uncounted_releases END,
                 uncounted_since = CASE WHEN ?7 THEN coalesce(uncounted_since, ?2) ELSE NULL END
                 WHERE id = ?1 AND status = 'claimed'",
            )?
            .execute(params![
                id, now, not_before, reason, counted, refusal, uncounted
            ])?;
        Ok(changed == 1)
    }

    /// The run of uncounted give-backs of a command starts its age afresh (its count stays):
    /// the command waited in the queue well past its grace, so nobody was giving it back
    /// meanwhile (see `service::agent::leases`).
    pub(crate) fn restart_uncounted_age(&self, id: i64) -> Result<()> {
        self.0
            .prepare_cached("UPDATE command SET uncounted_since = NULL WHERE id = ?1")?
            .execute([id])?;
        Ok(())
    }

    /// Whether a command given back (`released`) has waited out its grace and sits in the queue:
    /// the hub's times are one fixed-width form, so they compare as text.
    pub(crate) fn released_due(&self, now: &Utc) -> Result<bool> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM command WHERE status = 'queued'
                 AND not_before IS NOT NULL AND not_before <= ?1)",
            )?
            .query_row(params![now], |row| row.get(0))?)
    }

    /// Queues a `failed` or `skipped` command again: its outcome goes to `command_attempt`, the
    /// row starts afresh (no result, error, finishing times or lease); the delivery count and the
    /// Jira counters go on. Returns false when the command was not failed or skipped.
    pub(crate) fn retry_command(&self, id: i64, at: &Utc) -> Result<bool> {
        let kept = self
            .0
            .prepare_cached(concat!(
                "INSERT INTO command_attempt (id, command_id, status, deliveries, claimed_at,
                   claimed_by, finished_at, agent_finished_at, result, error, retried_at)
                 SELECT ",
                super::next_id!("command_attempt"),
                ", id, status, deliveries, claimed_at, claimed_by, finished_at,
                   agent_finished_at, result, error, ?2
                 FROM command WHERE id = ?1 AND status IN ('failed', 'skipped')"
            ))?
            .execute(params![id, at])?;
        if kept == 0 {
            return Ok(false);
        }
        self.0
            .prepare_cached(
                "UPDATE command SET status = 'queued', finished_at = NULL, agent_finished_at = NULL,
                   result = NULL, error = NULL, lease_at = NULL, uncounted_releases = 0,
                   uncounted_since = NULL WHERE id = ?1",
            )?
            .execute([id])?;
        Ok(true)
    }

    /// The delivery count when the command was last retried, if it ever was: the deliveries up
    /// to it belong to attempts that had already ended.
    pub(crate) fn deliveries_before_retry(&self, command_id: i64) -> Result<Option<u32>> {
        Ok(self
            .0
            .prepare_cached("SELECT max(deliveries) FROM command_attempt WHERE command_id = ?1")?
            .query_row([command_id], |row| row.get(0))?)
    }

    /// The earlier attempts of the commands of a batch, oldest first.
    pub(crate) fn attempts_of_batch(&self, batch_id: i64) -> Result<Vec<AttemptRow>> {
        let mut statement = self.0.prepare_cached(&format!(
            "SELECT {ATTEMPT_COLUMNS} FROM command_attempt a JOIN command c ON c.id = a.command_id
             WHERE c.batch_id = ?1 ORDER BY a.id"
        ))?;
        let rows = statement.query_map([batch_id], attempt_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The earlier attempts of the commands `ids`, oldest first (one query for a list).
    pub(crate) fn attempts_of_commands(&self, ids: &[i64]) -> Result<Vec<AttemptRow>> {
        let mut statement = self.0.prepare_cached(&format!(
            "SELECT {ATTEMPT_COLUMNS} FROM command_attempt a
             WHERE a.command_id IN (SELECT value FROM json_each(?1)) ORDER BY a.id"
        ))?;
        let ids = serde_json::to_string(ids).unwrap_or_default();
        let rows = statement.query_map([ids], attempt_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The earlier attempts of one command, oldest first.
    pub(crate) fn attempts_of(&self, command_id: i64) -> Result<Vec<AttemptRow>> {
        let mut statement = self.0.prepare_cached(&format!(
            "SELECT {ATTEMPT_COLUMNS} FROM command_attempt a WHERE a.command_id = ?1 ORDER BY a.id"
        ))?;
        let rows = statement.query_map([command_id], attempt_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The newest commands in one of `statuses`, at most `limit`.
    pub(crate) fn commands_with_status(
        &self,
        statuses: &[CommandStatus],
        limit: i64,
    ) -> Result<Vec<CommandRow>> {
        let names: Vec<&str> = statuses.iter().map(|s| s.as_str()).collect();
        let mut statement = self.0.prepare_cached(&format!(
            "SELECT {COMMAND_COLUMNS} FROM command c
             WHERE c.status IN (SELECT value FROM json_each(?1)) ORDER BY c.id DESC LIMIT ?2"
        ))?;
        let rows = statement.query_map(
            params![serde_json::to_string(&names).unwrap_or_default(), limit],
            command_from_row,
        )?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The edits (`ensure_issue` with this `key`) that may still be written or were written
    /// last, newest first: queued (given back too), claimed or done, in batches not cancelled.
    /// The hub bases a new edit of the issue on the newest of them that no refresh has read.
    pub(crate) fn live_edits_of(&self, key: &str) -> Result<Vec<CommandRow>> {
        let mut statement = self.0.prepare_cached(&format!(
            "SELECT {COMMAND_COLUMNS} FROM command c JOIN batch b ON b.id = c.batch_id
             WHERE c.type = 'ensure_issue' AND json_extract(c.params, '$.key') = ?1
               AND c.status IN ('queued', 'claimed', 'done') AND b.cancelled_at IS NULL
             ORDER BY c.id DESC"
        ))?;
        let rows = statement.query_map([key], command_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The commands that use this one's result.
    pub(crate) fn dependents(&self, id: i64) -> Result<Vec<CommandRow>> {
        let mut statement = self.0.prepare_cached(&format!(
            "SELECT {COMMAND_COLUMNS} FROM command c WHERE c.depends_on = ?1 ORDER BY c.id"
        ))?;
        let rows = statement.query_map([id], command_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Marks the batch cancelled and its queued commands cancelled; returns how many were.
    pub(crate) fn cancel_batch(&self, id: i64, at: &Utc) -> Result<usize> {
        self.0.execute(
            "UPDATE batch SET cancelled_at = ?2 WHERE id = ?1 AND cancelled_at IS NULL",
            params![id, at],
        )?;
        let kinds = self
            .0
            .prepare(
                "UPDATE command SET status = 'cancelled', finished_at = ?2 WHERE batch_id = ?1 AND status = 'queued'
                 RETURNING type",
            )?
            .query_map(params![id, at], |row| row.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut tally = self.1.borrow_mut();
        for kind in &kinds {
            tally.finished(CommandStatus::Cancelled, kind);
        }
        Ok(kinds.len())
    }

    /// Whether any refresh is queued or claimed, whatever its query.
    pub(crate) fn any_refresh_pending(&self) -> Result<bool> {
        Ok(self.0.query_row(
            "SELECT EXISTS (SELECT 1 FROM command WHERE type = 'refresh' AND status IN ('queued', 'claimed'))",
            [],
            |row| row.get(0),
        )?)
    }

    /// Refresh commands queued or claimed in batches not cancelled, oldest first: `(batch id,
    /// params)`.
    pub(crate) fn pending_refreshes(&self) -> Result<Vec<(i64, serde_json::Value)>> {
        let mut statement = self.0.prepare_cached(
            "SELECT c.batch_id, c.params FROM command c JOIN batch b ON b.id = c.batch_id
             WHERE c.type = 'refresh' AND c.status IN ('queued', 'claimed') AND b.cancelled_at IS NULL
             ORDER BY c.id",
        )?;
        let rows = statement.query_map([], |row| {
            let params: String = row.get(1)?;
            Ok((row.get(0)?, params))
        })?;
        let mut pending = Vec::new();
        for row in rows {
            let (batch, params) = row?;
            // A row whose params do not parse cannot be the same refresh.
            if let Ok(params) = serde_json::from_str(&params) {
                pending.push((batch, params));
            }
        }
        Ok(pending)
    }

    /// When the newest refresh of `jql`, full or incremental (`jql AND updated >= …`), was
    /// enqueued.
    pub(crate) fn last_refresh_enqueued(&self, jql: &str) -> Result<Option<Utc>> {
        Ok(self.0.query_row(
            "SELECT max(b.created_at) FROM command c JOIN batch b ON b.id = c.batch_id
             WHERE c.type = 'refresh' AND (json_extract(c.params, '$.jql') = ?1
               OR substr(json_extract(c.params, '$.jql'), 1, length(?1) + 16) = ?1 || ' AND updated >= ')",
            [jql],
            |row| row.get(0),
        )?)
    }
}
