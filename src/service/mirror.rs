//! Reading the mirror: a project's slice (own issues and neighbours), one issue with its links,
//! comments and notes, adding a note, sync runs, agents.

use super::batches::settings_in;
use super::views::{
    AgentView, CommentView, IssueLinkView, IssueView, NoteView, SliceJson, SliceRow, SyncRunView,
    issue_parts,
};
use super::{HubConnection, Result, ServiceError};
use crate::domain::ValidationError;
use crate::domain::time::{Utc, parse_utc};
use crate::store::{AGENTS_LISTED, StoreError, Tx};

/// How many records of handled agent requests one call of `prune_remembered` forgets at most
/// (the timer calls it every minute: far more than agents make).
const PRUNE_BATCH: i64 = 5_000;
use serde_json::Value;

/// `updated_since` read as a time.
fn parse_since(updated_since: Option<&str>) -> Result<Option<Utc>> {
    match updated_since {
        None => Ok(None),
        Some(text) => Ok(Some(parse_utc(text).map(Utc::new).ok_or_else(|| {
            ValidationError::new(
                "updated_since",
                "ожидается время ISO-8601 (RFC 3339), например 2026-01-05T10:00:00Z",
            )
        })?)),
    }
}

/// The closed statuses for a slice of project `label`; not found when there is no such project.
fn slice_closed_statuses(tx: &Tx<'_>, label: &str) -> Result<Vec<String>> {
    if !tx.projects()?.iter().any(|p| p.label == label) {
        return Err(ServiceError::NotFound(format!("Проекта «{label}» нет")));
    }
    Ok(settings_in(tx)?.closed_statuses)
}

/// The longest note, in characters.
const MAX_NOTE_CHARS: usize = 20_000;

impl HubConnection {
    /// `GET /projects/{label}/issues`.
    pub fn project_issues(&mut self, label: &str) -> Result<Vec<SliceRow>> {
        self.project_issues_since(label, None)
    }

    /// `GET /projects/{label}/issues?updated_since=T`: the rows of the slice whose stored content
    /// changed in the mirror at or after `T` (an RFC 3339 time; any offset, compared in UTC).
    /// Rows that left the slice are not reported: a client learns of them from the whole slice.
    pub fn project_issues_since(
        &mut self,
        label: &str,
        updated_since: Option<&str>,
    ) -> Result<Vec<SliceRow>> {
        let since = parse_since(updated_since)?;
        self.store.read(|tx| {
            let closed = slice_closed_statuses(tx, label)?;
            Ok(tx
                .slice(label, since.as_ref())?
                .into_iter()
                .map(|(row, neighbor)| {
                    let mirror_changed_at = row.mirror_changed_at.clone();
                    let (issue, synced_at) = issue_parts(row);
                    SliceRow {
                        closed: closed.contains(&issue.status),
                        issue,
                        synced_at,
                        mirror_changed_at,
                        neighbor,
                    }
                })
                .collect())
        })
    }

    /// [`HubConnection::project_issues_since`] as the JSON body of its answer, written straight
    /// from the stored rows: the same bytes as `serde_json::to_vec` of those rows, several times
    /// faster for a large slice.
    pub fn project_issues_json(
        &mut self,
        label: &str,
        updated_since: Option<&str>,
    ) -> Result<Vec<u8>> {
        let since = parse_since(updated_since)?;
        self.store.read(|tx| {
            let closed = slice_closed_statuses(tx, label)?;
            let mut json = SliceJson::new(&closed);
            tx.slice_each(label, &mut |issue, neighbor| {
                if issue.changed_since(since.as_ref()) {
                    json.push(&issue, neighbor).map_err(StoreError::Json)?;
                }
                Ok(())
            })?;
            Ok(json.finish())
        })
    }

    /// `GET /issues/{key}`.
    pub fn issue(&mut self, key: &str) -> Result<IssueView> {
        self.store.read(|tx| {
            let issue = tx
                .issue(key)?
                .ok_or_else(|| ServiceError::NotFound(format!("Задачи {key} нет в зеркале")))?;
            let (issue, synced_at) = issue_parts(issue);
            let closed = settings_in(tx)?.closed_statuses.contains(&issue.status);
            let mut links = Vec::new();
            for link in tx.links_of(key)? {
                let outward = link.source_key == key;
                let other_key = if outward {
                    link.target_key.clone()
                } else {
                    link.source_key.clone()
                };
                links.push(IssueLinkView {
                    other_in_mirror: tx.issue(&other_key)?.is_some(),
                    jira_id: link.jira_id,
                    link_type: link.link_type,
                    direction: if outward { "outward" } else { "inward" },
                    source_key: link.source_key,
                    target_key: link.target_key,
                    other_key,
                });
            }
            Ok(IssueView {
                fields: tx.issue_fields(key)?.unwrap_or(Value::Null),
                comments: tx
                    .comments_of(key)?
                    .into_iter()
                    .map(CommentView::from)
                    .collect(),
                notes: tx.notes_of(key)?.into_iter().map(NoteView::from).collect(),
                closed,
                links,
                issue,
                synced_at,
            })
        })
    }

    /// `POST /issues/{key}/notes`: a note of the hub's own, never sent to Jira.
    pub fn add_note(&mut self, key: &str, author: &str, body: &str) -> Result<NoteView> {
        let author = author.trim();
        if author.is_empty() || author.chars().count() > 100 {
            return Err(ValidationError::new("author", "автор — от 1 до 100 символов").into());
        }
        if body.trim().is_empty() {
            return Err(ValidationError::new("body", "заметка не может быть пустой").into());
        }
        if body.chars().count() > MAX_NOTE_CHARS {
            return Err(ValidationError::new(
                "body",
                format!("заметка длиннее {MAX_NOTE_CHARS} символов"),
            )
            .into());
        }
        let now = self.now();
        self.store.transact(|tx| {
            if tx.issue(key)?.is_none() {
                return Err(ServiceError::NotFound(format!(
                    "Задачи {key} нет в зеркале"
                )));
            }
            Ok(tx.add_note(key, author, body, &now)?.into())
        })
    }

    /// `GET /sync-runs`, newest first.
    pub fn sync_runs(&mut self) -> Result<Vec<SyncRunView>> {
        self.store
            .read(|tx| Ok(tx.runs(200)?.into_iter().map(SyncRunView::from).collect()))
    }

    /// The newest sync run of a refresh command, with its progress while it runs; `None` until an
    /// agent starts it.
    pub fn run_of_command(&mut self, command_id: i64) -> Result<Option<SyncRunView>> {
        self.store
            .read(|tx| Ok(tx.last_run_of_command(command_id)?.map(SyncRunView::from)))
    }

    /// `GET /agents`: the agents most recently seen first, at most `AGENTS_LISTED` (100)
    /// (those not seen for [`AGENT_RETENTION`](super::AGENT_RETENTION) are forgotten).
    pub fn agents(&mut self) -> Result<Vec<AgentView>> {
        let agents = self.store.read(|tx| {
            Ok::<_, super::ServiceError>(
                tx.agents(AGENTS_LISTED)?
                    .into_iter()
                    .map(AgentView::from)
                    .collect(),
            )
        })?;
        Ok(self.judged(agents))
    }

    /// Forgets an agent an operator names (`jira-hub agents forget`, the console's button): one
    /// that is silent or only ran a preflight (`agent --check`); a live agent is refused (it
    /// would show again at its next request). A refused or unknown name changes nothing.
    pub fn forget_agent(&mut self, name: &str) -> Result<AgentView> {
        let agent = self
            .agents()?
            .into_iter()
            .find(|a| a.agent == name)
            .ok_or_else(|| {
                super::ServiceError::NotFound(format!("Агента «{name}» хаб не знает"))
            })?;
        if !agent.silent && !agent.check_only {
            return Err(super::ServiceError::Conflict {
                field: "agent".into(),
                message: format!(
                    "Агент «{name}» на связи: забыть можно молчащего агента или разовую проверку (agent --check)"
                ),
            });
        }
        self.store.transact(|tx| tx.forget_agent(name))?;
        self.presence.forget(name);
        Ok(agent)
    }

    /// What the daemon's timer forgets: agents not seen for
    /// [`AGENT_RETENTION`](super::AGENT_RETENTION), and the records of handled agent requests
    /// older than the request retention (at least the relay's retention of its files, so that
    /// no request still in the share outlives the record of its id), at most
    /// `PRUNE_BATCH` (5,000) of those a call so that no call holds the write lock long. Returns
    /// (agents, requests) forgotten.
    pub fn prune_remembered(&mut self) -> Result<(usize, usize)> {
        let now = self.clock.now();
        let agents_before = Utc::new(now - super::AGENT_RETENTION);
        let requests_before = now - self.request_retention;
        let pruned = self.store.transact(|tx| -> Result<(usize, usize)> {
            Ok((
                tx.prune_agents(agents_before.as_str())?,
                tx.prune_requests(requests_before, PRUNE_BATCH)?,
            ))
        })?;
        // The idempotency keys whose answer names no batch are kept as long as the records of
        // agent requests (those that name one go with their batch).
        let keys = self.prune_old_keys(&Utc::new(requests_before), PRUNE_BATCH)?;
        if keys > 0 {
            tracing::info!(keys, "forgot old idempotency keys");
        }
        super::metrics::Metrics::add(&self.metrics.pruned_agent_requests, pruned.1 as u64);
        self.presence
            .forget_older_than(now - super::AGENT_RETENTION);
        if pruned != (0, 0) {
            tracing::info!(
                agents = pruned.0,
                requests = pruned.1,
                "forgot agents not seen and records of old agent requests"
            );
        }
        Ok(pruned)
    }
}
