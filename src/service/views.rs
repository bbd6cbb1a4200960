//! What the service answers: the views every transport shows (the HTTP API's JSON, the CLI).
//! Store rows never leave the service: each view is made here from its rows, so a column can
//! change without changing the API, and no column (a lease, a run's `full` flag) shows by
//! accident. Only views (and the domain values they carry) derive `Serialize` and `ToSchema`.

use crate::domain::command::{BatchStatus, CommandStatus, CommandType, RunKind, RunStatus};
use crate::domain::issue::MirrorFields;
use crate::domain::project::Project;
use crate::domain::time::Utc;
use crate::store::{
    AgentRow, AttemptRow, CommandRow, CommentRow, IssueRow, IssueText, NoteRow, RunRow,
    StatusCounts,
};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// A command as clients see it: params as enqueued, `$result` references kept.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CommandView {
    pub id: i64,
    pub batch_id: i64,
    pub seq: i64,
    #[serde(rename = "type")]
    pub command_type: CommandType,
    /// As enqueued: `$result` references are filled in only when handed out.
    #[schema(value_type = Object)]
    pub params: Value,
    pub status: CommandStatus,
    /// The time of the last delivery (data model); a progress page does not move it.
    #[schema(value_type = Option<String>)]
    pub claimed_at: Option<Utc>,
    /// The agent that claimed it last.
    pub claimed_by: Option<String>,
    pub deliveries: u32,
    /// The hub's time (UTC) when the command reached its terminal status.
    #[schema(value_type = Option<String>)]
    pub finished_at: Option<Utc>,
    /// The finishing time the agent reported, in UTC: the agent's clock, shown only.
    #[schema(value_type = Option<String>)]
    pub agent_finished_at: Option<Utc>,
    /// Its conflict's times in UTC (converted when the view is serialized).
    #[serde(serialize_with = "answered_result")]
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    pub error: Option<String>,
    pub jira_calls: i64,
    pub rate_limited: i64,
    pub pause_seconds: i64,
    /// The id of the command whose result this one uses.
    pub depends_on: Option<i64>,
    /// Earlier attempts, oldest first: each time an operator queued the command again after it
    /// failed or was skipped, how it had ended.
    pub attempts: Vec<AttemptView>,
    /// Queued again after its agent gave it back (a write's answer was lost: `error` says
    /// which): not handed out before this time (UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub not_before: Option<Utc>,
    /// How many times in a row its agent gave it back with nothing sent to Jira (uncounted
    /// deliveries), and since when (UTC); the hub fails it after
    /// `MAX_UNCOUNTED_RELEASES` of them or an hour. Absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub uncounted_releases: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub uncounted_since: Option<Utc>,
    /// A cancelled create or comment that was handed to an agent and never reported: Jira may
    /// hold what it made. The marker to look for (the entity property `jira-hub` of an issue or a
    /// comment, whose `command` and `batch` name this command).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub may_exist_in_jira: Option<Value>,
    /// While queued: why no agent seen so far could take it («ждёт агента, который проверяет
    /// конфликты»: an edit with a base that only agents of an older release claimed). Absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A cancelled command whose write may have reached Jira: a create (an
/// `ensure_issue` without a key) or a comment delivered at least once with no result.
fn may_exist_in_jira(row: &CommandRow) -> Option<Value> {
    let writes_new = match row.command_type {
        CommandType::Comment => true,
        CommandType::EnsureIssue => row.params.get("key").is_none_or(Value::is_null),
        _ => false,
    };
    (writes_new
        && row.status == CommandStatus::Cancelled
        && row.deliveries > 0
        && row.result.is_none())
    .then(|| serde_json::json!({"property": "jira-hub", "command": row.id, "batch": row.batch_id}))
}

/// A result as the API answers it (`serialize_with`): the times of an edit's conflict
/// (`conflict.updated`, each field's `changed_at`), kept as Jira wrote them
/// (`2026-03-05T10:15:30.000+0300`), in the hub's UTC form like every other time it answers. The
/// view itself keeps Jira's text (the console shows it as Jira wrote it).
fn answered_result<S: serde::Serializer>(
    result: &Option<Value>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    let Some(conflict) = result.as_ref().and_then(|r| r.get("conflict")) else {
        return result.serialize(serializer);
    };
    let mut conflict = conflict.clone();
    in_utc(conflict.get_mut("updated"));
    for field in conflict
        .get_mut("fields")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        in_utc(field.get_mut("changed_at"));
    }
    let mut result = result.clone().unwrap_or_default();
    result["conflict"] = conflict;
    result.serialize(serializer)
}

/// A Jira time (text) in the hub's UTC form; anything else (null, a text that is no time) as
/// it is.
fn in_utc(value: Option<&mut Value>) {
    if let Some(value) = value
        && let Some(at) = value.as_str().and_then(crate::jira::jira_time)
    {
        *value = Value::String(crate::domain::time::format_utc(at));
    }
}

/// A Jira time of a comment as the API answers it (`serialize_with`): in the hub's UTC form; a
/// text that is no time as it is.
fn answered_time<S: serde::Serializer>(
    text: &Option<String>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    match text.as_deref().and_then(crate::jira::jira_time) {
        Some(at) => serializer.serialize_some(&crate::domain::time::format_utc(at)),
        None => text.serialize(serializer),
    }
}

/// How an earlier attempt of a retried command ended.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AttemptView {
    /// `failed` or `skipped`.
    pub status: CommandStatus,
    /// The command's delivery count when it was retried.
    pub deliveries: u32,
    #[schema(value_type = Option<String>)]
    pub claimed_at: Option<Utc>,
    pub claimed_by: Option<String>,
    #[schema(value_type = Option<String>)]
    pub finished_at: Option<Utc>,
    #[schema(value_type = Option<String>)]
    pub agent_finished_at: Option<Utc>,
    #[serde(serialize_with = "answered_result")]
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    pub error: Option<String>,
    /// When an operator queued it again.
    #[schema(value_type = String)]
    pub retried_at: Utc,
}

impl From<AttemptRow> for AttemptView {
    fn from(row: AttemptRow) -> AttemptView {
        AttemptView {
            status: row.status,
            deliveries: row.deliveries,
            claimed_at: row.claimed_at,
            claimed_by: row.claimed_by,
            finished_at: row.finished_at,
            agent_finished_at: row.agent_finished_at,
            result: row.result,
            error: row.error,
            retried_at: row.retried_at,
        }
    }
}

impl CommandView {
    /// The view of a command with its earlier attempts (rows of that command only).
    pub(crate) fn with_attempts(row: CommandRow, attempts: Vec<AttemptRow>) -> CommandView {
        let mut view = CommandView::from(row);
        view.attempts = attempts.into_iter().map(AttemptView::from).collect();
        view
    }
}

impl From<CommandRow> for CommandView {
    fn from(row: CommandRow) -> CommandView {
        let may_exist_in_jira = may_exist_in_jira(&row);
        CommandView {
            id: row.id,
            batch_id: row.batch_id,
            seq: row.seq,
            command_type: row.command_type,
            params: row.params,
            status: row.status,
            claimed_at: row.claimed_at,
            claimed_by: row.claimed_by,
            deliveries: row.deliveries,
            finished_at: row.finished_at,
            agent_finished_at: row.agent_finished_at,
            result: row.result,
            error: row.error,
            jira_calls: row.jira_calls,
            rate_limited: row.rate_limited,
            pause_seconds: row.pause_seconds,
            depends_on: row.depends_on,
            attempts: Vec::new(),
            may_exist_in_jira,
            not_before: row
                .not_before
                .filter(|_| row.status == CommandStatus::Queued),
            uncounted_releases: row.uncounted_releases,
            uncounted_since: row.uncounted_since,
            waiting: row.withheld.filter(|_| row.status == CommandStatus::Queued),
        }
    }
}

/// A batch as clients see it (system.md §8).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct BatchView {
    pub id: i64,
    pub title: String,
    pub author: String,
    pub project: Option<String>,
    #[schema(value_type = String)]
    pub created_at: Utc,
    #[schema(value_type = Option<String>)]
    pub cancelled_at: Option<Utc>,
    pub estimate_seconds: Option<i64>,
    pub status: BatchStatus,
    #[schema(value_type = String)]
    pub status_label: &'static str,
    /// Commands per status, every status present.
    #[schema(value_type = std::collections::HashMap<String, usize>)]
    pub counters: BTreeMap<&'static str, usize>,
    /// Of the `failed` commands shown, those stopped by a conflict with a change made in Jira
    ///: the operator decides each; the other failures are Jira's refusals and faults.
    pub conflicts: usize,
    pub commands: Vec<CommandView>,
}

/// A batch in a list (`GET /batches`): the batch and its counters, without its commands
/// (`GET /batches/{id}` has them).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct BatchSummary {
    pub id: i64,
    pub title: String,
    pub author: String,
    pub project: Option<String>,
    #[schema(value_type = String)]
    pub created_at: Utc,
    #[schema(value_type = Option<String>)]
    pub cancelled_at: Option<Utc>,
    pub estimate_seconds: Option<i64>,
    pub status: BatchStatus,
    #[schema(value_type = String)]
    pub status_label: &'static str,
    /// Commands per status, every status present.
    #[schema(value_type = std::collections::HashMap<String, usize>)]
    pub counters: BTreeMap<&'static str, usize>,
    /// Of the `failed` commands, those stopped by a conflict with Jira.
    pub conflicts: usize,
    /// How many commands the batch has (the counters' sum).
    pub commands_total: usize,
}

impl From<BatchView> for BatchSummary {
    fn from(view: BatchView) -> Self {
        BatchSummary {
            commands_total: view.counters.values().sum(),
            id: view.id,
            title: view.title,
            author: view.author,
            project: view.project,
            created_at: view.created_at,
            cancelled_at: view.cancelled_at,
            estimate_seconds: view.estimate_seconds,
            status: view.status,
            status_label: view.status_label,
            counters: view.counters,
            conflicts: view.conflicts,
        }
    }
}

/// A slice row: the issue's mirror fields plus `neighbor` (relative to the project asked for)
/// and `closed` (its status is one of `closed_statuses`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SliceRow {
    #[serde(flatten)]
    pub issue: MirrorFields,
    /// When a refresh last brought the issue.
    #[schema(value_type = String)]
    pub synced_at: Utc,
    /// When its stored content last changed in the mirror (what `updated_since` compares).
    #[schema(value_type = Option<String>)]
    pub mirror_changed_at: Option<Utc>,
    pub neighbor: bool,
    pub closed: bool,
}

/// A slice written as JSON straight from the stored text, byte for byte what `serde_json` writes
/// for the same `Vec<SliceRow>` (the fields in [`SliceRow`]'s order, strings escaped by
/// `serde_json` itself), without building a row or a view per issue: the own rows are written as
/// they come, then put in key order once, the neighbours after them.
pub(super) struct SliceJson<'c> {
    closed_statuses: &'c [String],
    /// The own rows' JSON, one after another, in the order they came.
    own: Vec<u8>,
    /// Each own row: its key's and its JSON's ranges in `own`.
    own_rows: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
    /// The neighbours' JSON, each preceded by a comma.
    neighbours: Vec<u8>,
}

impl<'c> SliceJson<'c> {
    pub(super) fn new(closed_statuses: &'c [String]) -> SliceJson<'c> {
        // The size of the last slice written: a large slice is written again into memory taken
        // once, not grown by doubling (which copies it and faults its pages in again and again).
        let hint = SLICE_BYTES_HINT.load(std::sync::atomic::Ordering::Relaxed);
        SliceJson {
            closed_statuses,
            own: Vec::with_capacity(hint.clamp(1 << 16, 1 << 30)),
            own_rows: Vec::new(),
            neighbours: Vec::new(),
        }
    }

    /// Adds a row: an own issue (any order) or a neighbour (after every own one, by key).
    pub(super) fn push(&mut self, issue: &IssueText<'_>, neighbor: bool) -> serde_json::Result<()> {
        if neighbor {
            self.neighbours.push(b',');
            write_slice_row(&mut self.neighbours, issue, neighbor, self.closed_statuses)
        } else {
            let start = self.own.len();
            write_slice_row(&mut self.own, issue, neighbor, self.closed_statuses)?;
            // `{"key":` then the key as a JSON string; its range without the quotes.
            let key_start = start + 8;
            let key_end = key_start + json_string_len(&self.own[key_start..]);
            self.own_rows
                .push((key_start..key_end, start..self.own.len()));
            Ok(())
        }
    }

    /// The JSON array: the own rows by key (their keys compared as SQLite's BINARY collation
    /// compares the stored text: byte by byte), then the neighbours.
    pub(super) fn finish(mut self) -> Vec<u8> {
        let own = &self.own;
        // Written keys compare as the keys when neither needs escaping, the case of Jira keys.
        let plain = self
            .own_rows
            .iter()
            .all(|(key, _)| !own[key.clone()].contains(&b'\\'));
        if plain {
            self.own_rows
                .sort_unstable_by(|(a, _), (b, _)| own[a.clone()].cmp(&own[b.clone()]));
        } else {
            let key = |range: &std::ops::Range<usize>| -> String {
                let quoted = &own[range.start - 1..range.end + 1];
                serde_json::from_slice(quoted).unwrap_or_default()
            };
            self.own_rows.sort_by_cached_key(|(range, _)| key(range));
        }
        let mut json =
            Vec::with_capacity(self.own.len() + self.own_rows.len() + self.neighbours.len() + 2);
        json.push(b'[');
        for (i, (_, row)) in self.own_rows.iter().enumerate() {
            if i > 0 {
                json.push(b',');
            }
            json.extend_from_slice(&self.own[row.clone()]);
        }
        let neighbours = match self.own_rows.is_empty() {
            // No own row before them: the first neighbour's comma goes.
            true => self.neighbours.get(1..).unwrap_or_default(),
            false => &self.neighbours[..],
        };
        json.extend_from_slice(neighbours);
        json.push(b']');
        SLICE_BYTES_HINT.store(
            json.len() + json.len() / 8,
            std::sync::atomic::Ordering::Relaxed,
        );
        json
    }
}

/// The size of the last slice [`SliceJson`] wrote, an eighth more: how much it takes at first.
static SLICE_BYTES_HINT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The length of the JSON string's content at the start of `bytes`: up to its closing quote.
fn json_string_len(bytes: &[u8]) -> usize {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// `value` as a JSON string, as `serde_json` writes it: copied whole when nothing in it needs
/// escaping (one pass that the compiler vectorizes, no early exit), else by `serde_json`.
fn json_string(out: &mut Vec<u8>, value: &str) -> serde_json::Result<()> {
    let escaped = value.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if escaped {
        return serde_json::to_writer(&mut *out, value);
    }
    out.reserve(value.len() + 2);
    out.push(b'"');
    out.extend_from_slice(value.as_bytes());
    out.push(b'"');
    Ok(())
}

/// One [`SliceRow`] as `serde_json` writes it.
fn write_slice_row(
    out: &mut Vec<u8>,
    issue: &IssueText<'_>,
    neighbor: bool,
    closed_statuses: &[String],
) -> serde_json::Result<()> {
    // Every field but `labels` is a string or null: the columns in `MirrorFields`' order.
    let field = |out: &mut Vec<u8>, (name, value): (&str, Option<&str>)| {
        out.extend_from_slice(name.as_bytes());
        match value {
            Some(value) => json_string(out, value),
            None => {
                out.extend_from_slice(b"null");
                Ok(())
            }
        }
    };
    for pair in [
        ("{\"key\":", Some(issue.key)),
        (",\"jira_id\":", issue.jira_id),
        (",\"issue_type\":", Some(issue.issue_type)),
        (",\"summary\":", Some(issue.summary)),
        (",\"description\":", issue.description),
        (",\"status\":", Some(issue.status)),
        (",\"priority\":", issue.priority),
        (",\"assignee\":", issue.assignee),
        (",\"reporter\":", issue.reporter),
    ] {
        field(out, pair)?;
    }
    out.extend_from_slice(b",\"labels\":[");
    for (i, label) in issue.labels().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_string(out, label.as_ref())?;
    }
    out.push(b']');
    for pair in [
        (",\"epic_key\":", issue.epic_key),
        (",\"sprint\":", issue.sprint),
        (",\"duedate\":", issue.duedate),
        (",\"plan_start\":", issue.plan_start),
        (",\"plan_end\":", issue.plan_end),
        (",\"created_at\":", issue.created_at),
        (",\"updated_at\":", issue.updated_at),
        (",\"synced_at\":", Some(issue.synced_at)),
        (",\"mirror_changed_at\":", Some(issue.mirror_changed_at)),
    ] {
        field(out, pair)?;
    }
    out.extend_from_slice(if neighbor {
        b",\"neighbor\":true"
    } else {
        b",\"neighbor\":false"
    });
    let closed = closed_statuses.iter().any(|status| status == issue.status);
    out.extend_from_slice(if closed {
        b",\"closed\":true}"
    } else {
        b",\"closed\":false}"
    });
    Ok(())
}

/// A link as seen from one issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct IssueLinkView {
    pub jira_id: Option<String>,
    pub link_type: String,
    /// `outward` when this issue is the link's source, `inward` when it is the target.
    #[schema(value_type = String)]
    pub direction: &'static str,
    pub source_key: String,
    pub target_key: String,
    /// The issue at the other end.
    pub other_key: String,
    /// Whether the other issue is in the mirror.
    pub other_in_mirror: bool,
}

/// A Jira comment of an issue: the view keeps its times as Jira wrote them (the console shows
/// them so), the API answers them in UTC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CommentView {
    pub id: String,
    pub author: Option<String>,
    pub body: String,
    /// When Jira says it was written, answered in UTC.
    #[serde(serialize_with = "answered_time")]
    #[schema(format = DateTime)]
    pub created: Option<String>,
    /// When Jira says it was last changed, answered in UTC.
    #[serde(serialize_with = "answered_time")]
    #[schema(format = DateTime)]
    pub updated: Option<String>,
}

impl From<CommentRow> for CommentView {
    fn from(row: CommentRow) -> CommentView {
        CommentView {
            id: row.id,
            author: row.author,
            body: row.body,
            created: row.created,
            updated: row.updated,
        }
    }
}

/// A note of the hub's own on an issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct NoteView {
    pub id: i64,
    pub issue_key: String,
    pub author: String,
    pub body: String,
    #[schema(value_type = String)]
    pub created_at: Utc,
    #[schema(value_type = Option<String>)]
    pub updated_at: Option<Utc>,
}

impl From<NoteRow> for NoteView {
    fn from(row: NoteRow) -> NoteView {
        NoteView {
            id: row.id,
            issue_key: row.issue_key,
            author: row.author,
            body: row.body,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct IssueView {
    #[serde(flatten)]
    pub issue: MirrorFields,
    /// When a refresh last brought the issue.
    #[schema(value_type = String)]
    pub synced_at: Utc,
    pub closed: bool,
    /// The issue's Jira `fields` as last received, unchanged: this mirrors Jira's raw issue, so
    /// its times are Jira's text with Jira's offset (`2026-03-05T10:15:30.000+0300`), unlike
    /// every other time the API answers (UTC, `Z`).
    #[schema(value_type = Object)]
    pub fields: Value,
    pub links: Vec<IssueLinkView>,
    pub comments: Vec<CommentView>,
    pub notes: Vec<NoteView>,
}

/// A sync run (the refresh it executes, what it saw).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RunView {
    pub id: i64,
    /// The batch of the refresh: a refresh is a batch with a run, and this is its number
    /// everywhere (the console's «пакет 5», the CLI's `batch 5`).
    pub batch_id: Option<i64>,
    /// The refresh command the run executes.
    pub command_id: Option<i64>,
    pub query: String,
    #[schema(value_type = String)]
    pub started_at: Utc,
    #[schema(value_type = Option<String>)]
    pub finished_at: Option<Utc>,
    pub status: RunStatus,
    pub issues_seen: i64,
    pub issues_changed: i64,
    pub error: Option<String>,
    /// Pages of issues received so far: the progress of a running refresh.
    pub pages: i64,
    /// How many issues Jira said the search has, when it said (Data Center does; Cloud's search
    /// does not, so a Cloud run shows pages and issues only).
    pub total: Option<i64>,
}

/// A sync run with its kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct SyncRunView {
    #[serde(flatten)]
    pub run: RunView,
    /// Its query was the base JQL when the run started (recorded then: adding a project later
    /// does not change what an earlier run was); `kind` is `full`.
    pub full: bool,
    /// `full` (the base JQL; the only kind that removes issues that left the scope),
    /// `incremental` (a scope's JQL `AND updated >= <epoch ms>`; never removes anything) or
    /// `partial` (any other query: a project's refresh, an older base JQL), fixed when it started.
    pub kind: RunKind,
}

impl From<RunRow> for SyncRunView {
    fn from(row: RunRow) -> SyncRunView {
        SyncRunView {
            full: row.full,
            kind: row.kind,
            run: RunView {
                id: row.id,
                batch_id: row.batch_id,
                command_id: row.command_id,
                query: row.query,
                started_at: row.started_at,
                finished_at: row.finished_at,
                status: row.status,
                issues_seen: row.issues_seen,
                issues_changed: row.issues_changed,
                error: row.error,
                pages: row.pages,
                total: row.total,
            },
        }
    }
}

/// A project of the bridge: a Jira label inside the hub's Jira project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ProjectView {
    /// The Jira label; the project's identity, never changed after creation.
    pub label: String,
    /// A human name, trimmed.
    pub name: String,
    /// The Jira board the project plans on, when it has one.
    pub board_id: Option<i64>,
    /// `scrum` or `kanban`, learned only from a refresh result; `None` until then.
    pub board_type: Option<String>,
    /// ISO-8601 UTC with microseconds; orders the labels in the base JQL.
    #[schema(value_type = String)]
    pub created_at: Utc,
}

impl From<Project> for ProjectView {
    fn from(project: Project) -> ProjectView {
        ProjectView {
            label: project.label,
            name: project.name,
            board_id: project.board_id,
            board_type: project.board_type,
            created_at: project.created_at,
        }
    }
}

/// An agent as the hub last saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct AgentView {
    pub agent: String,
    pub version: Option<String>,
    /// Its protocol revision, capabilities and commit, as its last claim or heartbeat said.
    pub peer: PeerView,
    #[schema(value_type = String)]
    pub last_seen_at: Utc,
    pub jira_ok: Option<bool>,
    pub last_error: Option<String>,
    /// The last preflight (`jira-hub agent --check`) it sent; absent when none came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_check: Option<crate::protocol::CheckReport>,
    /// While the agent says Jira is held for it (its credentials refused, Jira not
    /// reachable): since when (UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub jira_down_since: Option<Utc>,
    /// The same in words, its reason and since when: «Jira не принимает учётные данные агента
    /// (HTTP 401) с 13:05 UTC». Every view of the agent shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jira_held: Option<String>,
    /// How often it said it sends a heartbeat, in seconds; absent for an agent that never said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat_seconds: Option<u32>,
    /// Only ever ran a preflight (`jira-hub agent --check`: no claim for work, no report): a
    /// check, never flagged silent.
    pub check_only: bool,
    /// While the hub refuses the agent's token (requests in its name refused since its last
    /// accepted one), in words with since when: «Хаб отвергает токен агента с 10:05 UTC».
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hub_refused: Option<String>,
    /// Silent: no request of its own for `silent_after_seconds` (two heartbeat periods, or a
    /// fixed 20 minutes for an agent that never told its period), silent since `last_seen_at`
    /// ([`agent_is_silent`](super::agent_is_silent), the one rule of every view).
    pub silent: bool,
    /// After how long without a request of its own the agent is flagged silent, in seconds.
    pub silent_after_seconds: i64,
}

/// What an agent said of itself: its protocol revision (1 when it said nothing: the previous
/// release), what it can honour, and the commit it was built from (when it said).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PeerView {
    pub protocol: u32,
    pub capabilities: Vec<String>,
    pub commit: Option<String>,
}

impl PeerView {
    /// From the stored text ([`peer_text`]); `None` (the previous release) is revision 1.
    pub(crate) fn of(text: Option<&str>) -> PeerView {
        let value: Value = text
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or(Value::Null);
        PeerView {
            protocol: value["protocol"]
                .as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or(1),
            capabilities: value["capabilities"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect(),
            commit: value["commit"].as_str().map(str::to_string),
        }
    }

    /// Whether it checks an edit's base before writing.
    pub fn checks_bases(&self) -> bool {
        self.capabilities
            .iter()
            .any(|c| c == crate::protocol::CAP_EDIT_BASE)
    }
}

/// What a claim or heartbeat said of its agent, as `agent_status.peer` keeps it (`None`: it said
/// nothing, the previous release).
pub(crate) fn peer_text(peer: &crate::protocol::Peer) -> Option<String> {
    if *peer == crate::protocol::Peer::default() {
        return None;
    }
    Some(
        serde_json::json!({
            "protocol": peer.revision(),
            "capabilities": peer.capabilities,
            "commit": peer.build.as_ref().map(|b| b.commit.as_str()),
        })
        .to_string(),
    )
}

/// «<reason> с 13:05 UTC» (the day too, `с 2026-11-30 13:05 UTC`, when it is not `today`).
pub(crate) fn held_words(reason: &str, since: &Utc, today: time::Date) -> String {
    let at = since.at().to_offset(time::UtcOffset::UTC);
    let clock = format!("{:02}:{:02}", at.hour(), at.minute());
    if at.date() == today {
        format!("{reason} с {clock} UTC")
    } else {
        format!("{reason} с {} {clock} UTC", at.date())
    }
}

impl From<AgentRow> for AgentView {
    fn from(row: AgentRow) -> AgentView {
        let jira_held = match (&row.jira_ok, &row.jira_down_since) {
            (Some(false), Some(since)) => Some(held_words(
                row.last_error.as_deref().unwrap_or("Jira недоступна"),
                since,
                // The day of its last word (the hub's clock): a state since an earlier day
                // names the day too.
                row.last_seen_at.at().to_offset(time::UtcOffset::UTC).date(),
            )),
            _ => None,
        };
        AgentView {
            agent: row.agent,
            version: row.version,
            peer: PeerView::of(row.peer.as_deref()),
            last_seen_at: row.last_seen_at,
            jira_ok: row.jira_ok,
            last_error: row.last_error,
            last_check: row
                .last_check
                .as_deref()
                .and_then(|text| serde_json::from_str(text).ok()),
            jira_held,
            jira_down_since: row.jira_down_since.filter(|_| row.jira_ok == Some(false)),
            heartbeat_seconds: row.heartbeat_seconds,
            check_only: row.check_only,
            hub_refused: None,
            silent: false,
            silent_after_seconds: silent_after(row.heartbeat_seconds),
        }
    }
}

/// Commands of one status, as `jira-hub status` and the metrics count them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueCount {
    /// The status as stored (one the hub does not know is shown as it is).
    pub status: String,
    pub commands: i64,
}

impl QueueCount {
    /// Every status the hub knows, in its order, with the stored counts (zero where none is
    /// stored), then any stored status it does not know: what the console and `/metrics` list.
    pub(crate) fn every_status<'a>(
        stored: impl IntoIterator<Item = (&'a str, i64)>,
    ) -> Vec<QueueCount> {
        let mut queue: Vec<QueueCount> = crate::domain::command::CommandStatus::ALL
            .iter()
            .map(|status| QueueCount {
                status: status.as_str().to_string(),
                commands: 0,
            })
            .collect();
        for (status, commands) in stored {
            match queue.iter_mut().find(|q| q.status == status) {
                Some(known) => known.commands = commands,
                None => queue.push(QueueCount {
                    status: status.to_string(),
                    commands,
                }),
            }
        }
        queue
    }
}

/// The counts `jira-hub status` and `GET /metrics` show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CountsView {
    pub queue: Vec<QueueCount>,
    pub agents: Vec<AgentView>,
    pub issues: i64,
    pub notes: i64,
    pub batches: i64,
    /// Since when the oldest queued command has waited (its batch's creation, or its retry).
    pub oldest_queued_since: Option<Utc>,
    /// Commands given back with nothing sent to Jira, those give-backs summed, and since when
    /// the oldest such run has lasted.
    pub uncounted_commands: i64,
    pub uncounted_releases: i64,
    pub oldest_uncounted_since: Option<Utc>,
}

impl From<StatusCounts> for CountsView {
    fn from(counts: StatusCounts) -> CountsView {
        CountsView {
            queue: counts
                .queue
                .into_iter()
                .map(|q| QueueCount {
                    status: q.status,
                    commands: q.commands,
                })
                .collect(),
            agents: counts.agents.into_iter().map(AgentView::from).collect(),
            issues: counts.issues,
            notes: counts.notes,
            batches: counts.batches,
            oldest_queued_since: counts.oldest_queued_since,
            uncounted_commands: counts.uncounted.commands,
            uncounted_releases: counts.uncounted.releases,
            oldest_uncounted_since: counts.uncounted.oldest_since,
        }
    }
}

/// An issue row's parts as views show them: its mirrored fields and when it was synced.
pub(super) fn issue_parts(row: IssueRow) -> (MirrorFields, Utc) {
    (row.mirrored, row.synced_at)
}

/// After how many seconds without a request of its own an agent is flagged silent: two
/// heartbeat periods, or [`AGENT_SILENT_SECONDS`](super::AGENT_SILENT_SECONDS) for an agent that
/// never told its period.
pub(crate) fn silent_after(heartbeat_seconds: Option<u32>) -> i64 {
    match heartbeat_seconds {
        Some(period) => 2 * i64::from(period),
        None => super::AGENT_SILENT_SECONDS,
    }
}
