//! Finished batches past their retention: found in pages of the batch table
//! walked by id, exported as JSON, deleted with their commands and attempts. The rules (which
//! batch is finished, how old is old) are the service's; the store only reads and deletes rows.

use super::{Result, Tx};
use serde_json::{Map, Value};

/// One batch as the retention walk sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchAge {
    pub id: i64,
    pub created_at: String,
    pub cancelled_at: Option<String>,
    /// Commands not final (queued, claimed): the batch is never pruned while there are any.
    pub open: i64,
    /// Commands that ended failed, skipped or cancelled.
    pub unhappy: i64,
    pub commands: i64,
    /// The latest `finished_at` of its commands.
    pub last_finished: Option<String>,
}

/// What deleting one batch removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Removed {
    pub batches: u64,
    pub commands: u64,
    pub attempts: u64,
}

impl std::ops::AddAssign for Removed {
    fn add_assign(&mut self, other: Removed) {
        self.batches += other.batches;
        self.commands += other.commands;
        self.attempts += other.attempts;
    }
}

impl Tx<'_> {
    /// The batches after id `after`, oldest first, at most `limit`, with what retention needs
    /// of their commands (read through the `command (batch_id, status)` index).
    pub(crate) fn batch_ages(&self, after: i64, limit: i64) -> Result<Vec<BatchAge>> {
        let mut statement = self.0.prepare_cached(
            "SELECT b.id, b.created_at, b.cancelled_at,
                    (SELECT count(*) FROM command c WHERE c.batch_id = b.id
                        AND c.status IN ('queued', 'claimed')),
                    (SELECT count(*) FROM command c WHERE c.batch_id = b.id
                        AND c.status IN ('failed', 'skipped', 'cancelled')),
                    (SELECT count(*) FROM command c WHERE c.batch_id = b.id),
                    (SELECT max(c.finished_at) FROM command c WHERE c.batch_id = b.id)
             FROM batch b WHERE b.id > ?1 ORDER BY b.id LIMIT ?2",
        )?;
        let rows = statement.query_map([after, limit], |row| {
            Ok(BatchAge {
                id: row.get(0)?,
                created_at: row.get(1)?,
                cancelled_at: row.get(2)?,
                open: row.get(3)?,
                unhappy: row.get(4)?,
                commands: row.get(5)?,
                last_finished: row.get(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// One batch with its commands and their earlier attempts, every column as stored (JSON
    /// columns parsed), for an audit trail: `{"batch": {…}, "commands": [{…, "attempts": […]}]}`.
    pub(crate) fn batch_record(&self, id: i64) -> Result<Value> {
        let batch = rows_as_json(&self.0, "SELECT * FROM batch WHERE id = ?1", id)?
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
        let mut commands = rows_as_json(
            &self.0,
            "SELECT * FROM command WHERE batch_id = ?1 ORDER BY seq",
            id,
        )?;
        for command in &mut commands {
            let command_id = command["id"].as_i64().unwrap_or_default();
            let attempts = rows_as_json(
                &self.0,
                "SELECT * FROM command_attempt WHERE command_id = ?1 ORDER BY id",
                command_id,
            )?;
            command["attempts"] = Value::Array(attempts);
        }
        Ok(serde_json::json!({"batch": batch, "commands": commands}))
    }

    /// Deletes a batch, its commands and their attempts; the refreshes it ran keep their
    /// history without the link to a command that is gone.
    pub(crate) fn delete_batch(&self, id: i64) -> Result<Removed> {
        // Its ids (and its commands' and attempts') stay issued: never given to a new row.
        super::ids::hold(&self.0, &["batch", "command", "command_attempt"])?;
        self.0
            .prepare_cached(
                "UPDATE sync_run SET command_id = NULL
                 WHERE command_id IN (SELECT id FROM command WHERE batch_id = ?1)",
            )?
            .execute([id])?;
        let attempts = self
            .0
            .prepare_cached(
                "DELETE FROM command_attempt
                 WHERE command_id IN (SELECT id FROM command WHERE batch_id = ?1)",
            )?
            .execute([id])?;
        let commands = self
            .0
            .prepare_cached("DELETE FROM command WHERE batch_id = ?1")?
            .execute([id])?;
        // The keys of requests whose answer named the batch go with it.
        self.0
            .prepare_cached("DELETE FROM idempotency_key WHERE batch_id = ?1")?
            .execute([id])?;
        let batches = self
            .0
            .prepare_cached("DELETE FROM batch WHERE id = ?1")?
            .execute([id])?;
        Ok(Removed {
            batches: batches as u64,
            commands: commands as u64,
            attempts: attempts as u64,
        })
    }
}

/// The rows of `sql` (one `?1` parameter) as JSON objects by column name; a text that holds
/// JSON (params, results) is parsed, so the export is JSON all the way down.
fn rows_as_json(conn: &rusqlite::Connection, sql: &str, param: i64) -> Result<Vec<Value>> {
    let mut statement = conn.prepare_cached(sql)?;
    let names: Vec<String> = statement
        .column_names()
        .into_iter()
        .map(String::from)
        .collect();
    let mut rows = statement.query([param])?;
    let mut found = Vec::new();
    while let Some(row) = rows.next()? {
        let mut object = Map::new();
        for (i, name) in names.iter().enumerate() {
            use rusqlite::types::ValueRef;
            let value = match row.get_ref(i)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => Value::from(n),
                ValueRef::Real(x) => Value::from(x),
                ValueRef::Text(bytes) => {
                    let text = String::from_utf8_lossy(bytes);
                    match serde_json::from_str::<Value>(&text) {
                        Ok(parsed @ (Value::Object(_) | Value::Array(_))) => parsed,
                        _ => Value::String(text.into_owned()),
                    }
                }
                ValueRef::Blob(bytes) => {
                    Value::String(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
                }
            };
            object.insert(name.clone(), value);
        }
        found.push(Value::Object(object));
    }
    Ok(found)
}
