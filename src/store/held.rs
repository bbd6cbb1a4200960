//! The removals a full refresh did not apply by itself: `held_prune` (revision 8 of
//! v4) and the issues a full run missed.

use super::mirror::has_label;
use super::tx::Tx;
use super::{Result, Store};
use crate::domain::time::Utc;
use rusqlite::{OptionalExtension, params};
use std::collections::BTreeSet;

/// What a full run would remove: the keys it missed, and per project label its mirrored issues
/// and how many of them it missed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PrunePreview {
    pub keys: BTreeSet<String>,
    /// `(label, issues with the label, of them missed)`.
    pub by_label: Vec<(String, u64, u64)>,
}

/// A held full run: what it would remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeldRow {
    pub run_id: i64,
    pub started_at: Utc,
    pub keys: BTreeSet<String>,
    pub count: i64,
    /// `[{"label", "issues", "missing"}]` as JSON text.
    pub projects: String,
    pub held_at: Utc,
    /// The refresh's batch (a refresh is a batch with a run); `None` for a run older than
    /// `sync_run.batch_id`.
    pub batch_id: Option<i64>,
}

const HELD_SELECT: &str =
    "SELECT h.run_id, r.started_at, h.keys, h.count, h.projects, h.held_at, r.batch_id
     FROM held_prune h JOIN sync_run r ON r.id = h.run_id
     WHERE r.status = 'held' AND h.confirmed_at IS NULL";

fn held_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<HeldRow> {
    let keys: String = row.get(2)?;
    Ok(HeldRow {
        run_id: row.get(0)?,
        started_at: row.get(1)?,
        keys: serde_json::from_str(&keys).unwrap_or_default(),
        count: row.get(3)?,
        projects: row.get(4)?,
        held_at: row.get(5)?,
        batch_id: row.get(6)?,
    })
}

impl Tx<'_> {
    /// The issues run `run_id` missed: not seen since `run_started_at` (stored, or received and
    /// not stored), counted per label of `labels`.
    pub(crate) fn prune_preview(
        &self,
        run_id: i64,
        run_started_at: &Utc,
        labels: &[String],
    ) -> Result<PrunePreview> {
        let mut preview = PrunePreview {
            keys: BTreeSet::new(),
            by_label: labels.iter().map(|l| (l.clone(), 0, 0)).collect(),
        };
        let mut statement = self.0.prepare(&format!(
            "SELECT key, labels, {MISSED} FROM issue",
            MISSED = super::mirror::MISSED
        ))?;
        let mut rows = statement.query(params![run_id, run_started_at])?;
        while let Some(row) = rows.next()? {
            let key: String = row.get(0)?;
            let row_labels: Option<String> = row.get(1)?;
            let missed: bool = row.get(2)?;
            for (label, total, missing) in &mut preview.by_label {
                if row_labels.as_deref().is_some_and(|l| has_label(l, label)) {
                    *total += 1;
                    *missing += u64::from(missed);
                }
            }
            if missed {
                preview.keys.insert(key);
            }
        }
        Ok(preview)
    }

    /// Removes the issues of `keys` not seen since `run_started_at`, with their links and
    /// comments (their notes stay). Returns how many left.
    pub(crate) fn prune_keys(
        &self,
        keys: &BTreeSet<String>,
        run_started_at: &Utc,
    ) -> Result<usize> {
        let mut removed = 0;
        let mut stale = self
            .0
            .prepare("SELECT 1 FROM issue WHERE key = ?1 AND synced_at < ?2")?;
        for key in keys {
            if !stale.exists(params![key, run_started_at])? {
                continue;
            }
            self.0
                .execute("DELETE FROM issue_comment WHERE issue_key = ?1", [key])?;
            self.0.execute(
                "DELETE FROM issue_link WHERE source_key = ?1 OR target_key = ?1",
                [key],
            )?;
            removed += self.0.execute("DELETE FROM issue WHERE key = ?1", [key])?;
        }
        Ok(removed)
    }

    /// How many issues run `run_id` received, each counted once however many times it came (a
    /// command handed out again sends the same issues again in the same run): those stored since
    /// `run_started_at` and those it received and could not store.
    pub(crate) fn received_by_run(&self, run_id: i64, run_started_at: &Utc) -> Result<u64> {
        Ok(self.0.query_row(
            "SELECT count(*) FROM (SELECT key FROM issue WHERE synced_at >= ?2
                                   UNION SELECT key FROM sync_run_unstored WHERE run_id = ?1)",
            params![run_id, run_started_at],
            |row| row.get(0),
        )?)
    }

    /// Run `run_id` received the issue `key` and could not store it: its row keeps its content
    /// and its `synced_at`, and the run counts it as seen.
    pub(crate) fn note_unstored(&self, run_id: i64, key: &str) -> Result<()> {
        self.0
            .prepare_cached(
                "INSERT OR IGNORE INTO sync_run_unstored (run_id, key) VALUES (?1, ?2)",
            )?
            .execute(params![run_id, key])?;
        Ok(())
    }

    /// Records what a held run would remove.
    pub(crate) fn hold_prune(
        &self,
        run_id: i64,
        keys: &BTreeSet<String>,
        projects: &str,
        at: &Utc,
    ) -> Result<()> {
        let keys_json = serde_json::to_string(keys)?;
        self.0.execute(
            "INSERT OR REPLACE INTO held_prune (run_id, keys, count, projects, held_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![run_id, keys_json, keys.len() as i64, projects, at],
        )?;
        Ok(())
    }

    /// The held run `run_id`, when it still waits.
    pub(crate) fn held(&self, run_id: i64) -> Result<Option<HeldRow>> {
        Ok(self
            .0
            .query_row(
                &format!("{HELD_SELECT} AND h.run_id = ?1"),
                [run_id],
                held_from_row,
            )
            .optional()?)
    }

    /// The held run's removals were applied: by whom (an operator, or a later run).
    pub(crate) fn confirm_held(&self, run_id: i64, at: &Utc, by: &str) -> Result<()> {
        self.0.execute(
            "UPDATE held_prune SET confirmed_at = ?2, confirmed_by = ?3 WHERE run_id = ?1",
            params![run_id, at, by],
        )?;
        self.0.execute(
            "UPDATE sync_run SET status = 'done' WHERE id = ?1 AND status = 'held'",
            [run_id],
        )?;
        Ok(())
    }

    /// Held runs other than `except` are superseded by a newer full run: they fail, saying so.
    pub(crate) fn supersede_held(&self, except: i64, reason: &str) -> Result<usize> {
        Ok(self.0.execute(
            "UPDATE sync_run SET status = 'failed', error = ?2 WHERE status = 'held' AND id != ?1",
            params![except, reason],
        )?)
    }
}

impl Store {
    /// Held runs still waiting for a confirmation, newest first.
    pub(crate) fn held_runs(&self) -> Result<Vec<HeldRow>> {
        let mut statement = self
            .conn
            .prepare(&format!("{HELD_SELECT} ORDER BY h.run_id DESC"))?;
        let rows = statement.query_map([], held_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}
