//! The mirror: `issue`, `issue_link`, `issue_comment`, `issue_note`, `sync_run`, and the
//! projects' `board_type` learned from refreshes.
//!
//! Notes belong to the hub, not to Jira: nothing here deletes one. When an issue leaves the
//! mirror its notes stay, keyed by the issue key, and show again when it comes back; when Jira
//! moves an issue to a new key (same Jira id), its notes follow it.

use super::status::{RUN_COLUMNS, run_from_row};
use super::tx::{Tx, stored_utc};
use super::{Result, RunRow};
use crate::domain::command::{RunKind, RunStatus};
use crate::domain::issue::MirrorFields;
use crate::domain::time::Utc;
use crate::jira::MirrorIssue;
use rusqlite::types::ValueRef;
use rusqlite::{CachedStatement, OptionalExtension, Row, params};
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashSet};

/// Whether `label` is one of the labels in the `labels` column, as SQLite's
/// `EXISTS (SELECT 1 FROM json_each(labels) WHERE value = ?)` reads it: a top-level string
/// element of an array (or value of an object, or the scalar itself) equal to it.
pub(super) fn has_label(labels: &str, label: &str) -> bool {
    // The common case, an array of plain strings, without allocating each one.
    if let Ok(strings) = serde_json::from_str::<Vec<&str>>(labels) {
        return strings.contains(&label);
    }
    match serde_json::from_str::<Value>(labels) {
        Ok(Value::Array(values)) => values.iter().any(|v| v.as_str() == Some(label)),
        Ok(Value::Object(values)) => values.values().any(|v| v.as_str() == Some(label)),
        Ok(Value::String(value)) => value == label,
        Ok(_) | Err(_) => false,
    }
}

/// An issue as the mirror holds it: its mirrored fields and when it was last synced.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IssueRow {
    pub mirrored: MirrorFields,
    pub synced_at: Utc,
    /// When its stored content last changed (inserted, other fields, moved); `None` only if
    /// edited by hand.
    pub mirror_changed_at: Option<Utc>,
}

const ISSUE_COLUMNS: &str = "key, jira_id, issue_type, summary, description, status, priority, assignee, reporter, \
     labels, epic_key, sprint, duedate, plan_start, plan_end, created_at, updated_at, synced_at, mirror_changed_at";

/// An issue a full run missed (`?1` the run, `?2` its start, on `issue`): no refresh stored it
/// since the run started, and the run did not receive it unstored either.
pub(super) const MISSED: &str = "(synced_at < ?2 AND key NOT IN
     (SELECT key FROM sync_run_unstored WHERE run_id = ?1))";

/// [`ISSUE_COLUMNS`] as read: a row that revision 2 of v4 found in the mirror keeps
/// `mirror_changed_at` NULL, which means its `synced_at` (the upsert stores that value the first
/// time it keeps such a row's content), so the revision rewrites no row.
const ISSUE_SELECT: &str = "key, jira_id, issue_type, summary, description, status, priority, assignee, reporter, \
     labels, epic_key, sprint, duedate, plan_start, plan_end, created_at, updated_at, synced_at, \
     COALESCE(mirror_changed_at, synced_at)";

/// The upsert of one issue, written once (the statement cache is looked up by its text).
static UPSERT_ISSUE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "INSERT INTO issue ({ISSUE_COLUMNS}, fields) VALUES
         (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?18, ?19)
         ON CONFLICT (key) DO UPDATE SET jira_id = excluded.jira_id, issue_type = excluded.issue_type,
           summary = excluded.summary, description = excluded.description, status = excluded.status,
           priority = excluded.priority, assignee = excluded.assignee, reporter = excluded.reporter,
           labels = excluded.labels, epic_key = excluded.epic_key, sprint = excluded.sprint,
           duedate = excluded.duedate, plan_start = excluded.plan_start, plan_end = excluded.plan_end,
           created_at = excluded.created_at, updated_at = excluded.updated_at,
           synced_at = excluded.synced_at, fields = excluded.fields,
           mirror_changed_at = CASE WHEN ?20 THEN excluded.synced_at
           ELSE COALESCE(issue.mirror_changed_at, issue.synced_at) END"
    )
});

fn issue_from_row(row: &Row<'_>) -> rusqlite::Result<IssueRow> {
    let labels: String = row.get(9)?;
    Ok(IssueRow {
        mirrored: MirrorFields {
            key: row.get(0)?,
            jira_id: row.get(1)?,
            issue_type: row.get(2)?,
            summary: row.get(3)?,
            description: row.get(4)?,
            status: row.get(5)?,
            priority: row.get(6)?,
            assignee: row.get(7)?,
            reporter: row.get(8)?,
            labels: serde_json::from_str(&labels).unwrap_or_default(),
            epic_key: row.get(10)?,
            sprint: row.get(11)?,
            duedate: row.get(12)?,
            plan_start: row.get(13)?,
            plan_end: row.get(14)?,
            created_at: row.get(15)?,
            updated_at: row.get(16)?,
        },
        synced_at: row.get(17)?,
        mirror_changed_at: row.get(18)?,
    })
}

/// An issue row as SQLite holds it, borrowed from the statement: the slice is written out from it
/// without building an [`IssueRow`] (no allocation per column, no time parsed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct IssueText<'a> {
    pub key: &'a str,
    pub jira_id: Option<&'a str>,
    pub issue_type: &'a str,
    pub summary: &'a str,
    pub description: Option<&'a str>,
    pub status: &'a str,
    pub priority: Option<&'a str>,
    pub assignee: Option<&'a str>,
    pub reporter: Option<&'a str>,
    /// The column's JSON text.
    pub labels: &'a str,
    pub epic_key: Option<&'a str>,
    pub sprint: Option<&'a str>,
    pub duedate: Option<&'a str>,
    pub plan_start: Option<&'a str>,
    pub plan_end: Option<&'a str>,
    pub created_at: Option<&'a str>,
    pub updated_at: Option<&'a str>,
    pub synced_at: &'a str,
    /// `COALESCE(mirror_changed_at, synced_at)`.
    pub mirror_changed_at: &'a str,
}

impl<'a> IssueText<'a> {
    /// Borrows a row of `SELECT {ISSUE_SELECT}`.
    fn from_row(row: &'a Row<'_>) -> rusqlite::Result<IssueText<'a>> {
        let text = |i: usize| row.get_ref(i)?.as_str().map_err(from_sql(i));
        let maybe = |i: usize| row.get_ref(i)?.as_str_or_null().map_err(from_sql(i));
        Ok(IssueText {
            key: text(0)?,
            jira_id: maybe(1)?,
            issue_type: text(2)?,
            summary: text(3)?,
            description: maybe(4)?,
            status: text(5)?,
            priority: maybe(6)?,
            assignee: maybe(7)?,
            reporter: maybe(8)?,
            labels: text(9)?,
            epic_key: maybe(10)?,
            sprint: maybe(11)?,
            duedate: maybe(12)?,
            plan_start: maybe(13)?,
            plan_end: maybe(14)?,
            created_at: maybe(15)?,
            updated_at: maybe(16)?,
            synced_at: text(17)?,
            mirror_changed_at: text(18)?,
        })
    }

    /// Whether its stored content changed at or after `since` (every row when `None`).
    pub(crate) fn changed_since(&self, since: Option<&Utc>) -> bool {
        since.is_none_or(|since| &stored_utc(self.mirror_changed_at) >= since)
    }

    /// The labels, as [`IssueRow`] reads them: the column's JSON array of strings, else none.
    pub(crate) fn labels(&self) -> Vec<std::borrow::Cow<'a, str>> {
        match serde_json::from_str::<Vec<&str>>(self.labels) {
            Ok(labels) => labels.into_iter().map(std::borrow::Cow::Borrowed).collect(),
            // Escaped strings cannot be borrowed.
            Err(_) => serde_json::from_str::<Vec<String>>(self.labels)
                .unwrap_or_default()
                .into_iter()
                .map(std::borrow::Cow::Owned)
                .collect(),
        }
    }

    fn to_row(self) -> IssueRow {
        let owned = |text: Option<&str>| text.map(str::to_string);
        IssueRow {
            mirrored: MirrorFields {
                key: self.key.to_string(),
                jira_id: owned(self.jira_id),
                issue_type: self.issue_type.to_string(),
                summary: self.summary.to_string(),
                description: owned(self.description),
                status: self.status.to_string(),
                priority: owned(self.priority),
                assignee: owned(self.assignee),
                reporter: owned(self.reporter),
                labels: self.labels().into_iter().map(|l| l.into_owned()).collect(),
                epic_key: owned(self.epic_key),
                sprint: owned(self.sprint),
                duedate: owned(self.duedate),
                plan_start: owned(self.plan_start),
                plan_end: owned(self.plan_end),
                created_at: self.created_at.map(stored_utc),
                updated_at: self.updated_at.map(stored_utc),
            },
            synced_at: stored_utc(self.synced_at),
            mirror_changed_at: Some(stored_utc(self.mirror_changed_at)),
        }
    }
}

/// A column of the wrong type, as `Row::get` reports it.
fn from_sql(index: usize) -> impl FnOnce(rusqlite::types::FromSqlError) -> rusqlite::Error {
    move |error| {
        rusqlite::Error::FromSqlConversionFailure(
            index,
            rusqlite::types::Type::Text,
            Box::new(error),
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinkRow {
    pub jira_id: Option<String>,
    pub source_key: String,
    pub target_key: String,
    pub link_type: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommentRow {
    pub id: String,
    pub author: Option<String>,
    pub body: String,
    pub created: Option<String>,
    pub updated: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NoteRow {
    pub id: i64,
    pub issue_key: String,
    pub author: String,
    pub body: String,
    pub created_at: Utc,
    pub updated_at: Option<Utc>,
}

/// What an upsert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Upserted {
    /// New, or its `fields` differ from what was stored.
    pub changed: bool,
    /// It came under a new key for a Jira id the mirror had under another.
    pub moved_from_other_key: bool,
}

/// Stores the issues of a refresh page one by one, with its statements prepared once for the
/// page (the statement cache is otherwise looked up by each statement's text, seven times an
/// issue).
pub(crate) struct IssueWriter<'t> {
    tx: &'t Tx<'t>,
    same_key: CachedStatement<'t>,
    other_key: CachedStatement<'t>,
    upsert: CachedStatement<'t>,
    stale_links: CachedStatement<'t>,
    link: CachedStatement<'t>,
    stale_comments: CachedStatement<'t>,
    comment: CachedStatement<'t>,
}

impl<'t> Tx<'t> {
    /// A writer of mapped issues inside this transaction.
    pub(crate) fn issue_writer(&'t self) -> Result<IssueWriter<'t>> {
        let prepare = |sql: &str| self.0.prepare_cached(sql);
        Ok(IssueWriter {
            tx: self,
            same_key: prepare("SELECT fields FROM issue WHERE key = ?1")?,
            other_key: prepare("SELECT key FROM issue WHERE jira_id = ?1 AND key <> ?2")?,
            upsert: prepare(&UPSERT_ISSUE)?,
            // The issue carries every link that touches it. A stored row touching it stays only
            // if it is one of those, same Jira id, same ends, same type: links deleted in Jira
            // go, and so does the old row of a link whose type was renamed.
            stale_links: prepare(
                "DELETE FROM issue_link WHERE (source_key = ?1 OR target_key = ?1) AND NOT EXISTS (
                     SELECT 1 FROM json_each(?2) AS j
                     WHERE j.value ->> 0 IS issue_link.jira_id AND j.value ->> 1 = issue_link.source_key
                       AND j.value ->> 2 = issue_link.target_key AND j.value ->> 3 = issue_link.link_type)",
            )?,
            // A link is listed by the issues at both of its ends: the second changes nothing.
            link: prepare(
                "INSERT INTO issue_link (jira_id, source_key, target_key, link_type) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (source_key, target_key, link_type) DO UPDATE SET jira_id = excluded.jira_id
                 WHERE issue_link.jira_id IS NOT excluded.jira_id",
            )?,
            stale_comments: prepare(
                "DELETE FROM issue_comment WHERE issue_key = ?1 AND id NOT IN (SELECT value FROM json_each(?2))",
            )?,
            comment: prepare(
                "INSERT INTO issue_comment (id, issue_key, author, body, created, updated) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET issue_key = excluded.issue_key, author = excluded.author,
                   body = excluded.body, created = excluded.created, updated = excluded.updated
                 WHERE issue_comment.issue_key IS NOT excluded.issue_key
                   OR issue_comment.author IS NOT excluded.author OR issue_comment.body IS NOT excluded.body
                   OR issue_comment.created IS NOT excluded.created
                   OR issue_comment.updated IS NOT excluded.updated",
            )?,
        })
    }
}

impl IssueWriter<'_> {
    /// Stores one mapped issue, its links and comments, as seen at `synced_at`.
    pub(crate) fn upsert(
        &mut self,
        mirror_issue: &MirrorIssue,
        synced_at: &Utc,
    ) -> Result<Upserted> {
        let fields = mirror_issue.fields_json.as_str();
        let issue = &mirror_issue.mirrored;
        // One look at the mirror: the row under this key (are its fields the same? compared where
        // SQLite keeps the stored text, never copied, and no page's text is bound only to be
        // compared) and a row under another key with this Jira id (Jira moved the issue). Two
        // point lookups, each by its own index (one query with `OR` builds a row set).
        let mut existing: Option<bool> = None;
        let mut old_key: Option<String> = None;
        {
            let mut rows = self.same_key.query([&issue.key])?;
            if let Some(row) = rows.next()? {
                let stored = row.get_ref(0)?;
                existing =
                    Some(matches!(stored, ValueRef::Text(text) if text == fields.as_bytes()));
            }
        }
        if let Some(jira_id) = &issue.jira_id {
            let mut rows = self.other_key.query(params![jira_id, issue.key])?;
            while let Some(row) = rows.next()? {
                old_key = Some(row.get(0)?);
            }
        }
        let mut moved = false;
        if let Some(old_key) = old_key {
            self.tx.move_issue(&old_key, &issue.key)?;
            moved = true;
        }
        let changed = existing != Some(true);
        self.upsert.execute(params![
            issue.key,
            issue.jira_id,
            issue.issue_type,
            issue.summary,
            issue.description,
            issue.status,
            issue.priority,
            issue.assignee,
            issue.reporter,
            serde_json::to_string(&issue.labels)?,
            issue.epic_key,
            issue.sprint,
            issue.duedate,
            issue.plan_start,
            issue.plan_end,
            issue.created_at,
            issue.updated_at,
            synced_at,
            fields,
            changed || moved
        ])?;
        // A new issue has no links or comments of its own stored yet (rows other issues stored
        // for it are theirs to keep current; a moved one brought its own along): only a known
        // issue's stale ones are looked for.
        let known = existing.is_some() || moved;
        if let Some(links) = &mirror_issue.links {
            if known {
                let current: Vec<Value> = links
                    .iter()
                    .map(|l| json!([l.jira_id, l.source_key, l.target_key, l.link_type]))
                    .collect();
                self.stale_links
                    .execute(params![issue.key, Value::Array(current).to_string()])?;
            }
            for link in links {
                self.link.execute(params![
                    link.jira_id,
                    link.source_key,
                    link.target_key,
                    link.link_type
                ])?;
            }
        }
        if let Some(comments) = &mirror_issue.comments {
            if known {
                let ids: Vec<&str> = comments.iter().map(|c| c.id.as_str()).collect();
                self.stale_comments
                    .execute(params![issue.key, json!(ids).to_string()])?;
            }
            for comment in comments {
                self.comment.execute(params![
                    comment.id,
                    issue.key,
                    comment.author,
                    comment.body,
                    comment.created,
                    comment.updated
                ])?;
            }
        }
        Ok(Upserted {
            changed: changed || moved,
            moved_from_other_key: moved,
        })
    }
}

impl Tx<'_> {
    /// Jira moved an issue to a new key: its notes and links follow; its old row goes.
    fn move_issue(&self, old_key: &str, new_key: &str) -> Result<()> {
        self.0.execute(
            "UPDATE issue_note SET issue_key = ?2 WHERE issue_key = ?1",
            [old_key, new_key],
        )?;
        self.0.execute(
            "UPDATE OR REPLACE issue_link SET source_key = ?2 WHERE source_key = ?1",
            [old_key, new_key],
        )?;
        self.0.execute(
            "UPDATE OR REPLACE issue_link SET target_key = ?2 WHERE target_key = ?1",
            [old_key, new_key],
        )?;
        self.0.execute(
            "UPDATE issue_comment SET issue_key = ?2 WHERE issue_key = ?1",
            [old_key, new_key],
        )?;
        self.0
            .execute("DELETE FROM issue WHERE key = ?1", [old_key])?;
        Ok(())
    }

    /// Removes the issues full run `run_id` did not return (not seen since `run_started_at`)
    /// with their links and comments; their notes stay. Returns how many left.
    pub(crate) fn prune_unseen(&self, run_id: i64, run_started_at: &Utc) -> Result<usize> {
        let missed = format!("SELECT key FROM issue WHERE {MISSED}");
        let at = params![run_id, run_started_at];
        self.0.execute(
            &format!("DELETE FROM issue_comment WHERE issue_key IN ({missed})"),
            at,
        )?;
        self.0.execute(
            &format!(
                "DELETE FROM issue_link WHERE source_key IN ({missed}) OR target_key IN ({missed})"
            ),
            at,
        )?;
        Ok(self
            .0
            .execute(&format!("DELETE FROM issue WHERE {MISSED}"), at)?)
    }

    pub(crate) fn issue(&self, key: &str) -> Result<Option<IssueRow>> {
        Ok(self
            .0
            .prepare_cached(&format!("SELECT {ISSUE_SELECT} FROM issue WHERE key = ?1"))?
            .query_row([key], issue_from_row)
            .optional()?)
    }

    /// The raw `fields` of an issue as last received.
    pub(crate) fn issue_fields(&self, key: &str) -> Result<Option<Value>> {
        let text: Option<String> = self
            .0
            .query_row("SELECT fields FROM issue WHERE key = ?1", [key], |row| {
                row.get(0)
            })
            .optional()?;
        // Only a text the mirror can give back as an object is stored now; a row an older version
        // stored nested too deep to read shows as an empty object, never as a string.
        Ok(text.map(|text| match serde_json::from_str::<Value>(&text) {
            Ok(value @ Value::Object(_)) => value,
            Ok(_) | Err(_) => {
                tracing::warn!(%key, "the stored fields of an issue cannot be read back");
                Value::Object(serde_json::Map::new())
            }
        }))
    }

    /// Whether the mirror's row of `key` was written by a refresh that started after `since` and
    /// ended `done`: the row is what Jira showed after that moment (a lapsed transition
    /// is confirmed only from such a row). A refresh started earlier may have read Jira before
    /// `since` however late its pages came.
    pub(crate) fn issue_read_after(&self, key: &str, since: &Utc) -> Result<bool> {
        Ok(self.0.query_row(
            "SELECT EXISTS (SELECT 1 FROM issue i JOIN sync_run r
                 ON r.status = 'done' AND r.started_at > ?2
                AND i.synced_at >= r.started_at AND i.synced_at <= r.finished_at
              WHERE i.key = ?1)",
            params![key, since],
            |row| row.get(0),
        )?)
    }

    pub(crate) fn issue_count(&self) -> Result<i64> {
        Ok(self
            .0
            .query_row("SELECT count(*) FROM issue", [], |row| row.get(0))?)
    }

    pub(crate) fn link_exists(
        &self,
        source_key: &str,
        target_key: &str,
        link_type: &str,
    ) -> Result<bool> {
        Ok(self.0.query_row(
            "SELECT EXISTS (SELECT 1 FROM issue_link WHERE source_key = ?1 AND target_key = ?2 AND link_type = ?3)",
            [source_key, target_key, link_type],
            |row| row.get(0),
        )?)
    }

    /// The links that touch an issue, either side.
    pub(crate) fn links_of(&self, key: &str) -> Result<Vec<LinkRow>> {
        let mut statement = self.0.prepare(
            "SELECT jira_id, source_key, target_key, link_type FROM issue_link
             WHERE source_key = ?1 OR target_key = ?1 ORDER BY id",
        )?;
        let rows = statement.query_map([key], |row| {
            Ok(LinkRow {
                jira_id: row.get(0)?,
                source_key: row.get(1)?,
                target_key: row.get(2)?,
                link_type: row.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn comments_of(&self, key: &str) -> Result<Vec<CommentRow>> {
        let mut statement = self.0.prepare(
            "SELECT id, author, body, created, updated FROM issue_comment WHERE issue_key = ?1
             ORDER BY created, CAST(id AS INTEGER), id",
        )?;
        let rows = statement.query_map([key], |row| {
            Ok(CommentRow {
                id: row.get(0)?,
                author: row.get(1)?,
                body: row.get(2)?,
                created: row.get(3)?,
                updated: row.get(4)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn notes_of(&self, key: &str) -> Result<Vec<NoteRow>> {
        let mut statement = self.0.prepare(
            "SELECT id, issue_key, author, body, created_at, updated_at FROM issue_note WHERE issue_key = ?1 ORDER BY id",
        )?;
        let rows = statement.query_map([key], |row| {
            Ok(NoteRow {
                id: row.get(0)?,
                issue_key: row.get(1)?,
                author: row.get(2)?,
                body: row.get(3)?,
                created_at: row.get(4)?,
                updated_at: row.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn add_note(
        &self,
        key: &str,
        author: &str,
        body: &str,
        at: &Utc,
    ) -> Result<NoteRow> {
        self.0.execute(
            "INSERT INTO issue_note (issue_key, author, body, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![key, author, body, at],
        )?;
        Ok(NoteRow {
            id: self.0.last_insert_rowid(),
            issue_key: key.to_string(),
            author: author.to_string(),
            body: body.to_string(),
            created_at: at.clone(),
            updated_at: None,
        })
    }

    /// A project's slice (data-model «Свои и соседи»): its own issues (label in `labels`,
    /// exact) and its neighbours (issues without the label linked to an own issue either way,
    /// and the epics of own issues that are in the mirror), each with `neighbor`; own issues
    /// first, each part by key; only the rows whose stored content changed at or after
    /// `changed_since` when it is given (the neighbours are still those of every own issue).
    pub(crate) fn slice(
        &self,
        label: &str,
        changed_since: Option<&Utc>,
    ) -> Result<Vec<(IssueRow, bool)>> {
        let mut own = Vec::new();
        let mut neighbours = Vec::new();
        self.slice_each(label, &mut |issue, neighbor| {
            if issue.changed_since(changed_since) {
                let row = issue.to_row();
                if neighbor {
                    neighbours.push((row, true));
                } else {
                    own.push((row, false));
                }
            }
            Ok(())
        })?;
        // By key, as SQLite's BINARY collation compares: byte by byte.
        own.sort_unstable_by(|(a, _), (b, _)| a.mirrored.key.cmp(&b.mirrored.key));
        own.extend(neighbours);
        Ok(own)
    }

    /// The rows of [`Tx::slice`], every one (no `changed_since`), handed to `visit` as SQLite
    /// holds them, with `neighbor`: the own issues in table order, then the neighbours by key.
    ///
    /// One pass over `issue` (the label tested here, not by `json_each` in SQL), one over
    /// `issue_link`, then the few neighbours by key: no query plan that evaluates the own set
    /// more than once or sorts whole rows in temp files.
    pub(crate) fn slice_each(
        &self,
        label: &str,
        visit: &mut dyn FnMut(IssueText<'_>, bool) -> Result<()>,
    ) -> Result<()> {
        let mut own_keys: HashSet<String> = HashSet::new();
        let mut near: BTreeSet<String> = BTreeSet::new();
        {
            let mut statement = self
                .0
                .prepare_cached(&format!("SELECT {ISSUE_SELECT} FROM issue"))?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                let labels = match row.get_ref(9)? {
                    rusqlite::types::ValueRef::Text(text) => std::str::from_utf8(text).ok(),
                    _ => None,
                };
                if labels.is_some_and(|labels| has_label(labels, label)) {
                    let issue = IssueText::from_row(row)?;
                    own_keys.insert(issue.key.to_string());
                    if let Some(epic) = issue.epic_key
                        && !near.contains(epic)
                    {
                        near.insert(epic.to_string());
                    }
                    visit(issue, false)?;
                }
            }
        }
        {
            let mut statement = self
                .0
                .prepare_cached("SELECT source_key, target_key FROM issue_link")?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                let source = row.get_ref(0)?.as_str().map_err(from_sql(0))?;
                let target = row.get_ref(1)?.as_str().map_err(from_sql(1))?;
                let other = if own_keys.contains(source) {
                    target
                } else if own_keys.contains(target) {
                    source
                } else {
                    continue;
                };
                if !near.contains(other) {
                    near.insert(other.to_string());
                }
            }
        }
        let mut statement = self
            .0
            .prepare_cached(&format!("SELECT {ISSUE_SELECT} FROM issue WHERE key = ?1"))?;
        for key in near.iter().filter(|key| !own_keys.contains(key.as_str())) {
            let mut rows = statement.query([key])?;
            if let Some(row) = rows.next()? {
                visit(IssueText::from_row(row)?, true)?;
            }
        }
        Ok(())
    }

    /// The open (running) run of a refresh command.
    pub(crate) fn open_run(&self, command_id: i64) -> Result<Option<RunRow>> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM sync_run WHERE command_id = ?1 AND status = 'running' ORDER BY id DESC LIMIT 1"
            ))?
            .query_row([command_id], run_from_row)
            .optional()?)
    }

    /// Opens a run; its kind and scope are what its query is now (facts of the run).
    pub(crate) fn start_run(
        &self,
        command_id: i64,
        query: &str,
        kind: RunKind,
        scope: &str,
        started_at: &Utc,
    ) -> Result<RunRow> {
        let full = kind == RunKind::Full;
        self.0.execute(
            concat!(
                "INSERT INTO sync_run (id, command_id, query, started_at, status, full, kind, scope,
                   batch_id) VALUES (",
                super::next_id!("sync_run"),
                ", ?1, ?2, ?3, 'running', ?4, ?5, ?6, (SELECT batch_id FROM command WHERE id = ?1))"
            ),
            params![command_id, query, started_at, full, kind.as_str(), scope],
        )?;
        let batch_id = self.0.query_row(
            "SELECT batch_id FROM sync_run WHERE id = last_insert_rowid()",
            [],
            |row| row.get(0),
        )?;
        Ok(RunRow {
            id: self.0.last_insert_rowid(),
            command_id: Some(command_id),
            query: query.to_string(),
            started_at: started_at.clone(),
            finished_at: None,
            status: RunStatus::Running,
            issues_seen: 0,
            issues_changed: 0,
            error: None,
            full,
            kind,
            scope: scope.to_string(),
            pages: 0,
            batch_id,
            total: None,
        })
    }

    /// One more page of the run: its issues seen and changed, and Jira's total when the page
    /// carried one.
    pub(crate) fn count_run_page(
        &self,
        run_id: i64,
        seen: i64,
        changed: i64,
        total: Option<u64>,
    ) -> Result<()> {
        let total = total.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
        self.0
            .prepare_cached(
                "UPDATE sync_run SET issues_seen = issues_seen + ?2, issues_changed = issues_changed + ?3,
                   pages = pages + 1, total = coalesce(?4, total) WHERE id = ?1",
            )?
            .execute(params![run_id, seen, changed, total])?;
        Ok(())
    }

    /// Ends a run; the issues it received and could not store are no longer wanted (its removals
    /// were decided, or it removes nothing).
    pub(crate) fn finish_run(
        &self,
        run_id: i64,
        status: RunStatus,
        finished_at: &Utc,
        error: Option<&str>,
    ) -> Result<()> {
        self.0.execute(
            "UPDATE sync_run SET status = ?2, finished_at = ?3, error = ?4 WHERE id = ?1",
            params![run_id, status.as_str(), finished_at, error],
        )?;
        self.0
            .execute("DELETE FROM sync_run_unstored WHERE run_id = ?1", [run_id])?;
        Ok(())
    }

    /// The newest successful run whose scope is one of `scopes`: a full or incremental run of the
    /// base JQL, or (for a project) a run of the project's own JQL, incremental or not. A run's
    /// scope is the base JQL only when it was full or incremental (its kind is fixed at start).
    pub(crate) fn last_complete_run(&self, scopes: &[&str]) -> Result<Option<RunRow>> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM sync_run
                 WHERE status = 'done' AND scope IN (SELECT value FROM json_each(?1))
                 ORDER BY started_at DESC, id DESC LIMIT 1"
            ))?
            .query_row([json!(scopes).to_string()], run_from_row)
            .optional()?)
    }

    /// The newest successful full run of `scope`.
    pub(crate) fn last_full_run_of(&self, scope: &str) -> Result<Option<RunRow>> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM sync_run
                 WHERE status = 'done' AND kind = 'full' AND scope = ?1
                 ORDER BY started_at DESC, id DESC LIMIT 1"
            ))?
            .query_row([scope], run_from_row)
            .optional()?)
    }

    /// Sync runs, newest first.
    pub(crate) fn runs(&self, limit: i64) -> Result<Vec<RunRow>> {
        let mut statement = self.0.prepare(&format!(
            "SELECT {RUN_COLUMNS} FROM sync_run ORDER BY started_at DESC, id DESC LIMIT ?1"
        ))?;
        let rows = statement.query_map([limit], run_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The newest run of a refresh command (a command redelivered or retried starts a new one).
    pub(crate) fn last_run_of_command(&self, command_id: i64) -> Result<Option<RunRow>> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM sync_run WHERE command_id = ?1 ORDER BY id DESC LIMIT 1"
            ))?
            .query_row([command_id], run_from_row)
            .optional()?)
    }

    /// Records the board types a refresh learned; returns how many projects changed.
    pub(crate) fn set_board_type(&self, board_id: i64, board_type: &str) -> Result<usize> {
        Ok(self.0.execute(
            "UPDATE project SET board_type = ?2 WHERE board_id = ?1",
            params![board_id, board_type],
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::has_label;

    /// The label test reads `labels` as `json_each` did: top-level strings, escapes decoded.
    #[test]
    fn has_label_reads_labels_as_json_each_did() {
        assert!(has_label(r#"["AWPCA","backend"]"#, "AWPCA"));
        assert!(has_label(r#"[ "x", "AWPCA" ]"#, "AWPCA"));
        assert!(!has_label(r#"["AWPCA2","xAWPCA"]"#, "AWPCA"));
        assert!(!has_label("[]", "AWPCA"));
        assert!(has_label(r#"["\u0410\u0411"]"#, "АБ"));
        assert!(has_label(r#"["a\"b", 5]"#, "a\"b"));
        assert!(!has_label("[5]", "5"));
        assert!(!has_label(r#"[["AWPCA"]]"#, "AWPCA"));
        assert!(has_label(r#"{"k":"AWPCA"}"#, "AWPCA"));
        assert!(has_label(r#""AWPCA""#, "AWPCA"));
        assert!(!has_label("not json", "AWPCA"));
    }
}
