//! Ids never reused: a batch, a command, an earlier attempt and a refresh run each get an id past
//! every one the database ever issued for its table, not only past the rows still there. SQLite's
//! `INTEGER PRIMARY KEY` takes the largest id present plus one, so after a prune emptied the end
//! of a table, or a restore put back a copy older than the file it replaced, it would hand out
//! numbers already in markers in Jira, exports and links. The highest issued id is kept in
//! `id_issued` (revision 16), raised before rows are deleted and by restore.

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;

/// The tables whose ids are never reused.
pub(super) const TABLES: [&str; 4] = ["batch", "command", "command_attempt", "sync_run"];

/// The SQL expression of the next id of `$table`: past its largest id and past the highest it
/// ever issued.
macro_rules! next_id {
    ($table:literal) => {
        concat!(
            "(max(coalesce((SELECT max(id) FROM ",
            $table,
            "), 0), coalesce((SELECT last FROM id_issued WHERE name = '",
            $table,
            "'), 0)) + 1)"
        )
    };
}
pub(super) use next_id;

/// Before rows of `tables` are deleted: the highest id each ever issued is kept.
pub(super) fn hold(conn: &Connection, tables: &[&str]) -> Result<()> {
    for table in tables {
        conn.execute(
            &format!(
                "INSERT INTO id_issued (name, last) SELECT ?1, coalesce(max(id), 0) FROM \"{table}\" WHERE true
                 ON CONFLICT (name) DO UPDATE SET last = max(last, excluded.last)"
            ),
            [table],
        )?;
    }
    Ok(())
}

/// The highest id each table of [`TABLES`] has issued in the database of `conn` (its largest
/// row, or the kept number of an older one when larger); a table it lacks counts 0.
pub(super) fn issued(conn: &Connection) -> Result<Vec<(&'static str, i64)>> {
    let has = |name: &str| -> Result<bool> {
        Ok(conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
            [name],
            |row| row.get(0),
        )?)
    };
    let kept = has("id_issued")?;
    let mut found = Vec::new();
    for table in TABLES {
        let mut last: i64 = if has(table)? {
            conn.query_row(
                &format!("SELECT coalesce(max(id), 0) FROM \"{table}\""),
                [],
                |row| row.get(0),
            )?
        } else {
            0
        };
        if kept {
            let held: Option<i64> = conn
                .query_row(
                    "SELECT last FROM id_issued WHERE name = ?1",
                    [table],
                    |row| row.get(0),
                )
                .optional()?;
            last = last.max(held.unwrap_or(0));
        }
        found.push((table, last));
    }
    Ok(found)
}

/// Raises the kept highest ids of the database of `conn` to at least `issued` (another file's),
/// making `id_issued` when the database (of an older revision) lacks it.
pub(super) fn raise(conn: &Connection, issued: &[(&str, i64)]) -> Result<()> {
    conn.execute_batch(&super::migrations::ID_ISSUED.replace(
        "CREATE TABLE id_issued",
        "CREATE TABLE IF NOT EXISTS id_issued",
    ))?;
    for (table, last) in issued {
        conn.execute(
            "INSERT INTO id_issued (name, last) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET last = max(last, excluded.last)",
            params![table, last],
        )?;
    }
    Ok(())
}
