//! A transaction handed to the service, so that an operation made of several reads and writes
//! (a claim, a report) runs in one transaction while rusqlite stays inside this module. The
//! queries are methods of [`Tx`], grouped by table in the sibling files.

use super::{AsStoreError, Result, Store, StoreError};
use crate::domain::command::{CommandStatus, CommandType, RunKind, RunStatus};
use crate::domain::time::Utc;
use rusqlite::{Transaction, TransactionBehavior};

/// An open transaction on the hub's database, with what it did that the process counts once it
/// is committed ([`Tallies`]).
pub(crate) struct Tx<'c>(
    pub(super) Transaction<'c>,
    pub(super) std::cell::RefCell<Tally>,
);

/// What one transaction did that `/metrics` counts: commands that reached a final status (by
/// status and type), and the Jira calls and rate-limited answers the agent reported with them.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    finished: Vec<(&'static str, &'static str)>,
    jira_calls: u64,
    rate_limited: u64,
}

impl Tally {
    /// A command of the stored type `kind` reached the final status `status`. A type the hub
    /// does not know (a row edited by hand) is counted as `unknown`: a label per stored text
    /// would be a series per text.
    pub(super) fn finished(&mut self, status: CommandStatus, kind: &str) {
        let kind = kind
            .parse::<CommandType>()
            .map_or("unknown", <&'static str>::from);
        self.finished.push((status.as_str(), kind));
    }

    pub(super) fn jira(&mut self, calls: u32, rate_limited: u32) {
        self.jira_calls += u64::from(calls);
        self.rate_limited += u64::from(rate_limited);
    }
}

/// What the committed transactions of this process did (shared by every connection of it, as
/// [`Store::reconnect`] shares the faults): counters that start at zero with the process, as
/// Prometheus' counters do (`rate()` and `increase()` take a restart as a reset). A transaction
/// rolled back counts nothing.
#[derive(Debug, Default)]
pub(crate) struct Tallies(std::sync::Mutex<Totals>);

/// The sums of [`Tallies`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Commands that reached a final status, by (status, type).
    pub finished: std::collections::BTreeMap<(&'static str, &'static str), u64>,
    pub jira_calls: u64,
    pub rate_limited: u64,
}

impl Tallies {
    fn add(&self, tally: Tally) {
        if tally.finished.is_empty() && tally.jira_calls == 0 && tally.rate_limited == 0 {
            return;
        }
        if let Ok(mut totals) = self.0.lock() {
            for key in tally.finished {
                *totals.finished.entry(key).or_default() += 1;
            }
            totals.jira_calls += tally.jira_calls;
            totals.rate_limited += tally.rate_limited;
        }
    }

    /// The sums now.
    pub(crate) fn totals(&self) -> Totals {
        self.0.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

impl Store {
    /// Runs `f` in a write transaction taken at once (`BEGIN IMMEDIATE`); commits when it
    /// succeeds, rolls back (nothing written) when it fails.
    /// Before the commit, the file at the path must still be the one opened (a write into a
    /// deleted file would be acknowledged and lost).
    pub(crate) fn transact<T, E: From<StoreError> + AsStoreError>(
        &mut self,
        f: impl FnOnce(&Tx<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let touched = self.writable_connection();
        let (path, identity, health) = (self.path.clone(), self.identity, self.health.clone());
        let changes = self.conn.total_changes();
        let result = (|| {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StoreError::from)?;
            let tx = Tx(tx, std::cell::RefCell::default());
            let value = f(&tx)?;
            super::remark(&tx.0, &health, changes)?;
            super::check_file(&path, identity, &health)?;
            tx.0.commit().map_err(StoreError::from)?;
            health.observe(&path);
            Ok((value, tx.1.into_inner()))
        })();
        let result = result.map(|(value, tally)| {
            self.tallies.add(tally);
            value
        });
        self.tell_batch_change(&result, touched);
        self.after_write(result, changes)
    }

    /// Runs `f` on one consistent snapshot, without taking the write lock.
    pub(crate) fn read<T, E: From<StoreError>>(
        &mut self,
        f: impl FnOnce(&Tx<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(StoreError::from)?;
        let tx = Tx(tx, std::cell::RefCell::default());
        let value = f(&tx)?;
        tx.0.commit().map_err(StoreError::from)?;
        Ok(value)
    }
}

impl Tx<'_> {
    /// Every stored setting, parsed (for rules that need them inside the transaction).
    pub(crate) fn settings_raw(
        &self,
    ) -> Result<std::collections::BTreeMap<String, serde_json::Value>> {
        super::settings::read_all(&self.0)
    }

    pub(crate) fn projects(&self) -> Result<Vec<crate::domain::project::Project>> {
        super::projects::list(&self.0)
    }
}

/// JSON text from a column, parsed; malformed JSON reads as a string so nothing is lost.
pub(super) fn json_column(text: Option<String>) -> Option<serde_json::Value> {
    text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)))
}

/// A stored time, typed; a text that is not a time (edited by hand) is kept with a warning.
impl rusqlite::types::FromSql for Utc {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        // Read in place: the text is copied once, into the `Utc`.
        Ok(stored_utc(value.as_str()?))
    }
}

/// A stored time read back: typed when it is an RFC 3339 time, else kept as text with a warning.
pub(super) fn stored_utc(text: &str) -> Utc {
    Utc::parse(text).unwrap_or_else(|| {
        tracing::warn!(%text, "a stored time is not an RFC 3339 time");
        Utc::not_a_time(text.to_string())
    })
}

impl rusqlite::types::ToSql for Utc {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::Borrowed(
            rusqlite::types::ValueRef::Text(self.as_str().as_bytes()),
        ))
    }
}

/// A command type by its wire name; an unknown one is an error of the row.
impl rusqlite::types::FromSql for CommandType {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let text = value.as_str()?;
        text.parse()
            .map_err(|error| rusqlite::types::FromSqlError::Other(Box::new(error)))
    }
}

/// A run kind; an unknown one (edited by hand) reads as partial: it never prunes.
impl rusqlite::types::FromSql for RunKind {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        Ok(value.as_str()?.parse().unwrap_or(RunKind::Partial))
    }
}

/// A run status; an unknown one (edited by hand) reads as failed, like a command's.
impl rusqlite::types::FromSql for RunStatus {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        Ok(value.as_str()?.parse().unwrap_or(RunStatus::Failed))
    }
}
