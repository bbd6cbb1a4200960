//! Aggregates for the operator's web console: activity by hour, batch counters, issue counts per project, the size of the database. Each is one
//! query over an index (or one pass of a table in Rust), so the overview stays fast with
//! 100,000 commands and 50,000 issues (`cargo bench --bench console`).

use super::Result;
use super::commands::{COMMAND_COLUMN_COUNT, COMMAND_COLUMNS, CommandRow, command_from_row};
use super::status::{RUN_COLUMNS, RunRow, run_from_row};
use super::tx::Tx;
use crate::domain::time::Utc;

/// Commands that reached their terminal status in one hour (UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HourRow {
    /// The hour as the first 13 characters of a stored time: `2026-11-30T03`.
    pub hour: String,
    pub commands: i64,
    /// Of them, those that succeeded (`done`, `confirmed_by_state`).
    pub done: i64,
    /// Jira's 429 answers those commands met.
    pub rate_limited: i64,
    /// The pauses the hub asked the agent to make before them, in seconds.
    pub pause_seconds: i64,
}

/// What the database file holds, in SQLite pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageCounts {
    pub pages: i64,
    pub page_size: i64,
    pub free_pages: i64,
}

/// One second of the queue's life: commands enqueued and finished in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueMove {
    /// `YYYY-MM-DDTHH:MM:SS` (UTC).
    pub second: String,
    pub enqueued: i64,
    pub finished: i64,
}

impl Tx<'_> {
    /// Commands finished at or after `since`, by hour (from the partial index
    /// `command_finished` alone, in its order: no sort).
    pub(crate) fn finished_per_hour(&self, since: &Utc) -> Result<Vec<HourRow>> {
        let mut statement = self.0.prepare_cached(
            "SELECT substr(finished_at, 1, 13), count(*), sum(rate_limited), sum(pause_seconds),
                    sum(status IN ('done', 'confirmed_by_state'))
             FROM command INDEXED BY command_finished WHERE finished_at >= ?1 GROUP BY 1",
        )?;
        let rows = statement.query_map([since], |row| {
            Ok(HourRow {
                hour: row.get(0)?,
                commands: row.get(1)?,
                rate_limited: row.get(2)?,
                pause_seconds: row.get(3)?,
                done: row.get(4)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// What moved the queue at or after `since`, by second (`YYYY-MM-DDTHH:MM:SS`) in time
    /// order: commands enqueued (their batch created; counted in the index
    /// `command_batch_status`) and commands that reached a terminal status (in the index
    /// `command_finished`). A second's enqueues come before its finishes: the hour's peak is
    /// never missed.
    pub(crate) fn queue_moves_since(&self, since: &Utc) -> Result<Vec<QueueMove>> {
        let mut statement = self.0.prepare_cached(
            "SELECT second, sum(enqueued), sum(finished) FROM (
                 SELECT substr(b.created_at, 1, 19) AS second,
                        (SELECT count(*) FROM command c WHERE c.batch_id = b.id) AS enqueued,
                        0 AS finished
                 FROM batch b WHERE b.created_at >= ?1
                 UNION ALL
                 SELECT substr(finished_at, 1, 19), 0, count(*)
                 FROM command INDEXED BY command_finished WHERE finished_at >= ?1 GROUP BY 1)
             GROUP BY second ORDER BY second",
        )?;
        let rows = statement.query_map([since], |row| {
            Ok(QueueMove {
                second: row.get(0)?,
                enqueued: row.get(1)?,
                finished: row.get(2)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// A batch's commands per stored status (through the index `command_batch_status`).
    pub(crate) fn batch_status_counts(&self, batch_id: i64) -> Result<Vec<(String, i64)>> {
        let mut statement = self.0.prepare_cached(
            "SELECT status, count(*) FROM command WHERE batch_id = ?1 GROUP BY status",
        )?;
        let rows = statement.query_map([batch_id], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// How many issues of the mirror carry each label, in the order given (one pass of
    /// `issue`, the label tested as the slice tests it).
    pub(crate) fn issue_counts_by_label(&self, labels: &[&str]) -> Result<Vec<i64>> {
        let mut counts = vec![0; labels.len()];
        let mut statement = self.0.prepare_cached("SELECT labels FROM issue")?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            let Ok(text) = row.get_ref(0)?.as_str() else {
                continue;
            };
            for (count, label) in counts.iter_mut().zip(labels) {
                if super::mirror::has_label(text, label) {
                    *count += 1;
                }
            }
        }
        Ok(counts)
    }

    /// The size of the database in pages.
    pub(crate) fn page_counts(&self) -> Result<PageCounts> {
        let pragma = |name: &str| -> Result<i64> {
            Ok(self
                .0
                .query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))?)
        };
        Ok(PageCounts {
            pages: pragma("page_count")?,
            page_size: pragma("page_size")?,
            free_pages: pragma("freelist_count")?,
        })
    }

    /// Refresh commands waiting in the queue (batches not cancelled), oldest first, each with its
    /// place in the queue as claims take it (oldest batch first, then by position): 1 is next.
    /// The count walks the partial index `command_queued`.
    pub(crate) fn queued_refreshes(&self) -> Result<Vec<(CommandRow, i64, Utc)>> {
        let mut statement = self.0.prepare_cached(&format!(
            "SELECT {COMMAND_COLUMNS},
                    (SELECT count(*) FROM command q INDEXED BY command_queued
                     WHERE q.status = 'queued'
                       AND (q.batch_id < c.batch_id OR (q.batch_id = c.batch_id AND q.seq < c.seq))) + 1,
                    b.created_at
             FROM command c JOIN batch b ON b.id = c.batch_id
             WHERE c.type = 'refresh' AND c.status = 'queued' AND b.cancelled_at IS NULL
             ORDER BY c.batch_id, c.seq"
        ))?;
        let rows = statement.query_map([], |row| {
            Ok((
                command_from_row(row)?,
                row.get(COMMAND_COLUMN_COUNT)?,
                row.get(COMMAND_COLUMN_COUNT + 1)?,
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The runs still going, oldest first.
    pub(crate) fn running_runs(&self) -> Result<Vec<RunRow>> {
        let mut statement = self.0.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM sync_run WHERE status = 'running' ORDER BY id"
        ))?;
        let rows = statement.query_map([], run_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}
