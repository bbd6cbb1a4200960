//! Retention of finished batches: the daemon's timer, and `jira-hub batches
//! prune`, delete batches finished longer ago than the `retention` setting, with their commands
//! and attempts, in small transactions; an export (JSON lines) when the operator wants a trail.
//!
//! The walk goes through the batch table by id from a cursor kept in memory, a page at a time,
//! and starts over from the first batch once it reaches batches too young to be pruned: a batch
//! kept longer (failed, or not finished) never stops the walk from reaching the older completed
//! ones after it.

use super::metrics::Metrics;
use super::{HubConnection, Result};
use crate::domain::settings::Retention;
use crate::domain::time::Utc;
use crate::store::{BatchAge, Removed};
use std::sync::atomic::Ordering;

/// Batches one transaction looks at.
const SCAN: i64 = 500;
/// Commands one transaction deletes at most (a batch is never split: one with more commands
/// goes alone).
const ROWS: u64 = 2_000;
/// Transactions one tick of the timer runs at most, with a pause between two.
const ROUNDS: usize = 20;
/// The pause between two transactions of one tick: other writers get the lock in between.
const PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// What one walk pruned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub batches: u64,
    pub commands: u64,
    pub attempts: u64,
}

/// The times before which a finished batch is old, as stored times compare.
struct Cutoffs {
    completed: Option<Utc>,
    failed: Option<Utc>,
}

impl Cutoffs {
    fn of(retention: Retention, now: time::OffsetDateTime) -> Cutoffs {
        let before =
            |days: u32| (days > 0).then(|| Utc::new(now - time::Duration::days(i64::from(days))));
        Cutoffs {
            completed: before(retention.completed_days),
            failed: before(retention.failed_days),
        }
    }

    /// The later of the two: a batch made after it cannot be old by either.
    fn latest(&self) -> Option<&str> {
        [&self.completed, &self.failed]
            .into_iter()
            .flatten()
            .map(Utc::as_str)
            .max()
    }

    /// Whether the batch is finished and old: no command queued or claimed, and finished (its
    /// last command, or its cancellation, or its creation when it has no command) before its
    /// kind's cutoff.
    fn prunes(&self, batch: &BatchAge) -> bool {
        if batch.open > 0 {
            return false;
        }
        let unhappy = batch.unhappy > 0 || batch.cancelled_at.is_some();
        let Some(cutoff) = (if unhappy {
            &self.failed
        } else {
            &self.completed
        }) else {
            return false;
        };
        let finished = [
            Some(batch.created_at.as_str()),
            batch.cancelled_at.as_deref(),
            batch.last_finished.as_deref(),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or_default();
        finished < cutoff.as_str()
    }
}

impl HubConnection {
    /// The timer's tick: a few small transactions of the walk, each deleting at most `ROWS`
    /// commands, until one finds nothing to prune.
    pub fn prune_finished(&mut self) -> Result<Pruned> {
        let retention = self.settings()?.retention;
        let mut total = Pruned::default();
        for round in 0..ROUNDS {
            if round > 0 {
                std::thread::sleep(PAUSE);
            }
            let (pruned, wrapped) = self.prune_round(retention, None, false)?;
            total.batches += pruned.batches;
            total.commands += pruned.commands;
            total.attempts += pruned.attempts;
            if pruned.batches == 0 && wrapped {
                break;
            }
        }
        if total.batches > 0 {
            tracing::info!(
                batches = total.batches,
                commands = total.commands,
                attempts = total.attempts,
                "pruned finished batches past their retention"
            );
        }
        Ok(total)
    }

    /// `jira-hub batches prune`: the whole walk once, from the first batch, each batch pruned
    /// written first to `export` (one JSON line: the batch, its commands, their attempts) when
    /// given; with `dry_run` nothing is deleted (the export says what would be).
    pub fn prune_finished_now(
        &mut self,
        mut export: Option<&mut dyn std::io::Write>,
        dry_run: bool,
    ) -> Result<Pruned> {
        let retention = self.settings()?.retention;
        self.metrics.retention_cursor.store(0, Ordering::Relaxed);
        let mut total = Pruned::default();
        loop {
            let out = export
                .as_mut()
                .map(|out| &mut **out as &mut dyn std::io::Write);
            let (pruned, wrapped) = self.prune_round(retention, out, dry_run)?;
            total.batches += pruned.batches;
            total.commands += pruned.commands;
            total.attempts += pruned.attempts;
            if wrapped {
                return Ok(total);
            }
        }
    }

    /// One step of the walk from the cursor: returns what it pruned (or, dry, would prune) and
    /// whether the walk came back to the start. The batches to prune are found, and their
    /// records read, in a read transaction; the export is written and flushed (synced, for the
    /// CLI's file) with no transaction open, so a slow or full target holds no writer and stops
    /// only the prune; then one write transaction deletes those of them that are still finished
    /// and old (a retry meanwhile keeps its batch, which is then in the export without having
    /// been deleted).
    fn prune_round(
        &mut self,
        retention: Retention,
        export: Option<&mut dyn std::io::Write>,
        dry_run: bool,
    ) -> Result<(Pruned, bool)> {
        let cutoffs = Cutoffs::of(retention, self.clock.now());
        let Some(latest) = cutoffs.latest().map(String::from) else {
            return Ok((Pruned::default(), true));
        };
        let cursor = &self.metrics.retention_cursor;
        let after = cursor.load(Ordering::Relaxed);
        let exporting = export.is_some();
        let (chosen, next, lines) = self.store.read(|tx| -> Result<(Chosen, i64, Vec<u8>)> {
            let (chosen, next) = choose(&tx.batch_ages(after, SCAN)?, after, &cutoffs, &latest);
            let mut lines = Vec::new();
            if exporting {
                for (id, _) in &chosen {
                    serde_json::to_writer(&mut lines, &tx.batch_record(*id)?)
                        .map_err(crate::store::StoreError::from)?;
                    lines.push(b'\n');
                }
            }
            Ok((chosen, next, lines))
        })?;
        // On disk before any row goes, and before the write lock is taken.
        if let Some(out) = export {
            out.write_all(&lines).map_err(export_failed)?;
            out.flush().map_err(export_failed)?;
        }
        let removed = if dry_run {
            let mut removed = Removed::default();
            for (_, commands) in &chosen {
                removed.batches += 1;
                removed.commands += commands;
            }
            removed
        } else if chosen.is_empty() {
            Removed::default()
        } else {
            self.store.transact(|tx| -> Result<Removed> {
                let (still, _) = choose(&tx.batch_ages(after, SCAN)?, after, &cutoffs, &latest);
                let mut removed = Removed::default();
                for (id, _) in chosen.iter().filter(|chosen| still.contains(chosen)) {
                    removed += tx.delete_batch(*id)?;
                }
                Ok(removed)
            })?
        };
        cursor.store(next, Ordering::Relaxed);
        if !dry_run {
            Metrics::add(&self.metrics.pruned_batches, removed.batches);
            Metrics::add(&self.metrics.pruned_commands, removed.commands);
            Metrics::add(&self.metrics.pruned_attempts, removed.attempts);
        }
        Ok((
            Pruned {
                batches: removed.batches,
                commands: removed.commands,
                attempts: removed.attempts,
            },
            next == 0,
        ))
    }
}

/// The batches one step prunes: (id, commands).
type Chosen = Vec<(i64, u64)>;

/// Of one page of the walk from `after`: the batches to prune (id, commands), at most `ROWS`
/// commands (a batch is never split: one with more commands goes alone), and where the walk
/// goes on (0: back at the start, having reached batches younger than any cutoff, or the end).
fn choose(batches: &[BatchAge], after: i64, cutoffs: &Cutoffs, latest: &str) -> (Chosen, i64) {
    let mut chosen = Vec::new();
    let mut commands_taken = 0;
    let mut next = after;
    let mut wrapped = batches.len() < SCAN as usize;
    for batch in batches {
        if batch.created_at.as_str() >= latest {
            wrapped = true;
            break;
        }
        let commands = u64::try_from(batch.commands).unwrap_or_default();
        if commands_taken > 0 && commands_taken + commands > ROWS {
            // This batch starts the next step.
            wrapped = false;
            break;
        }
        next = batch.id;
        if cutoffs.prunes(batch) {
            commands_taken += commands;
            chosen.push((batch.id, commands));
        }
    }
    (chosen, if wrapped { 0 } else { next })
}

fn export_failed(error: std::io::Error) -> super::ServiceError {
    super::ServiceError::Internal(crate::store::StoreError::Io {
        context: "не удалось записать выгрузку удаляемых пакетов".into(),
        source: error,
    })
}
