//! Batches of commands for Jira: enqueue (everything validated before anything is stored),
//! views with the computed status and counters, cancel, and refresh batches.

use super::views::{BatchSummary, BatchView, CommandView};
use super::{HubConnection, Result, ServiceError};
use crate::domain::ValidationError;
use crate::domain::command::{
    BatchScope, CommandRequest, CommandStatus, batch_status, counters, estimate_seconds,
    validate_commands,
};
use crate::domain::jql::{base_jql, incremental_jql, incremental_since, project_jql};
use crate::domain::settings::Settings;
use crate::domain::time::{Utc, format_utc};
use crate::store::{AttemptRow, BatchRow, CommandRow, Tx};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// What a refresh asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshSince {
    /// Everything the scope matches; the only kind that prunes (of the base JQL).
    Full,
    /// What changed since the start of the last successful run of the scope, less the overlap;
    /// full when there is no such run.
    Last,
}

impl RefreshSince {
    /// The word in a log line: `full` or `changes`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RefreshSince::Full => "full",
            RefreshSince::Last => "changes",
        }
    }
}

/// `POST /batches`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct BatchRequest {
    pub title: String,
    pub author: String,
    #[serde(default)]
    pub project: Option<String>,
    pub commands: Vec<CommandRequestBody>,
}

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct CommandRequestBody {
    #[serde(rename = "type")]
    pub command_type: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: Value,
    /// The `seq` (1-based) of an earlier command of the same batch.
    #[serde(default)]
    pub depends_on: Option<i64>,
}

pub(super) fn batch_view(tx: &Tx<'_>, batch: BatchRow) -> Result<BatchView> {
    let commands = tx.commands_of_batch(batch.id)?;
    let statuses: Vec<CommandStatus> = commands.iter().map(|c| c.status).collect();
    let commands = with_attempts(commands, tx.attempts_of_batch(batch.id)?);
    Ok(view_of(batch, &statuses, commands))
}

/// Each command's view with its earlier attempts (taken from `attempts`, in their order).
fn with_attempts(commands: Vec<CommandRow>, attempts: Vec<AttemptRow>) -> Vec<CommandView> {
    let mut by_command: BTreeMap<i64, Vec<AttemptRow>> = BTreeMap::new();
    for attempt in attempts {
        by_command
            .entry(attempt.command_id)
            .or_default()
            .push(attempt);
    }
    commands
        .into_iter()
        .map(|c| {
            let earlier = by_command.remove(&c.id).unwrap_or_default();
            CommandView::with_attempts(c, earlier)
        })
        .collect()
}

/// A batch's view from its row, the statuses of all its commands, and the commands it shows
/// (every one, or none in a list of batches).
pub(super) fn view_of(
    batch: BatchRow,
    statuses: &[CommandStatus],
    commands: Vec<CommandView>,
) -> BatchView {
    let status = batch_status(statuses, batch.cancelled_at.is_some());
    BatchView {
        id: batch.id,
        title: batch.title,
        author: batch.author,
        project: batch.project,
        created_at: batch.created_at,
        cancelled_at: batch.cancelled_at,
        estimate_seconds: batch.estimate_seconds,
        status,
        status_label: status.label(),
        counters: counters(statuses),
        conflicts: commands
            .iter()
            .filter(|c| {
                c.status == CommandStatus::Failed
                    && crate::domain::edit::conflict_of(c.result.as_ref()).is_some()
            })
            .count(),
        commands,
    }
}

fn text_field(field: &str, value: &str, max: usize) -> Result<String> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(ValidationError::new(field, "не может быть пустым").into());
    }
    if trimmed.chars().count() > max {
        return Err(ValidationError::new(field, format!("длиннее {max} символов")).into());
    }
    Ok(trimmed.to_string())
}

fn retry_conflict(message: String) -> ServiceError {
    ServiceError::Conflict {
        field: "command".into(),
        message,
    }
}

fn refuse_retry_in_cancelled_batch(batch: &BatchRow) -> Result<()> {
    if batch.cancelled_at.is_some() {
        return Err(ServiceError::Conflict {
            field: "batch".into(),
            message: format!("пакет {} отменён, его команды не повторяются", batch.id),
        });
    }
    Ok(())
}

/// Queues `command` again, and every command skipped because of it, transitively. Returns how
/// many were queued.
fn requeue_with_dependents(tx: &Tx<'_>, command: &CommandRow, now: &Utc) -> Result<usize> {
    // A work list, not recursion: a chain of dependents is as deep as the batch is long.
    let mut retried = 0;
    let mut pending = vec![command.id];
    while let Some(id) = pending.pop() {
        retried += usize::from(tx.retry_command(id, now)?);
        pending.extend(
            tx.dependents(id)?
                .into_iter()
                .filter(|dependent| dependent.status == CommandStatus::Skipped)
                .map(|dependent| dependent.id),
        );
    }
    Ok(retried)
}

pub(super) fn settings_in(tx: &Tx<'_>) -> Result<Settings> {
    Ok(Settings::from_stored(&tx.settings_raw()?).0)
}

/// The base JQL as the projects and settings in this transaction make it.
pub(super) fn base_jql_in(tx: &Tx<'_>, settings: &Settings) -> Result<Option<String>> {
    let projects = tx.projects()?;
    Ok(base_jql(
        settings.project_key.as_deref(),
        projects.iter().map(|p| p.label.as_str()),
    ))
}

/// How many batches a page of `GET /batches` holds unless asked otherwise, and at most.
pub const BATCH_PAGE_DEFAULT: i64 = 50;
pub const BATCH_PAGE_MAX: i64 = 500;

/// A batch about to be stored: its words and its commands as a client sends them.
pub(super) struct NewBatch<'a> {
    pub(super) title: &'a str,
    pub(super) author: &'a str,
    pub(super) project: Option<&'a str>,
    pub(super) commands: &'a [CommandRequest],
}

/// Validates every command of `new`, then stores it in `tx`; nothing is stored on a refusal.
pub(super) fn enqueue_in(tx: &Tx<'_>, new: &NewBatch<'_>, now: &Utc) -> Result<BatchView> {
    let settings = settings_in(tx)?;
    let scope = match new.project {
        None => None,
        Some(label) => {
            let project = tx
                .projects()?
                .into_iter()
                .find(|p| p.label == label)
                .ok_or_else(|| {
                    ServiceError::Invalid(ValidationError::new(
                        "project",
                        format!("проекта «{label}» нет"),
                    ))
                })?;
            Some(BatchScope {
                label: project.label,
                board_id: project.board_id,
            })
        }
    };
    let mut commands = validate_commands(new.commands, &settings, scope.as_ref())?;
    super::edits::record_bases(tx, &mut commands, &settings)?;
    let estimate = estimate_seconds(&commands, &settings.pacing, tx.issue_count()?);
    let batch_id = tx.insert_batch(
        new.title,
        new.author,
        now,
        estimate,
        scope.as_ref().map(|s| s.label.as_str()),
    )?;
    let mut ids: Vec<i64> = Vec::with_capacity(commands.len());
    for command in &commands {
        let depends_on = command.depends_on_seq.map(|seq| ids[(seq - 1) as usize]);
        ids.push(tx.insert_command(
            batch_id,
            command.seq,
            command.command_type,
            &command.params,
            depends_on,
        )?);
    }
    let batch = tx
        .batch(batch_id)?
        .ok_or_else(|| ServiceError::NotFound(format!("Пакета {batch_id} нет")))?;
    batch_view(tx, batch)
}

impl HubConnection {
    /// Validates every command, then stores the batch; nothing is stored on a refusal.
    pub fn enqueue_batch(&mut self, request: &BatchRequest) -> Result<BatchView> {
        let title = text_field("title", &request.title, 200)?;
        let author = text_field("author", &request.author, 100)?;
        let now = self.now();
        let requests: Vec<CommandRequest> = request
            .commands
            .iter()
            .map(|c| CommandRequest {
                command_type: c.command_type.clone(),
                params: c.params.clone(),
                depends_on: c.depends_on,
            })
            .collect();
        let view = self.store.transact(|tx| {
            let new = NewBatch {
                title: &title,
                author: &author,
                project: request.project.as_deref(),
                commands: &requests,
            };
            enqueue_in(tx, &new, &now)
        })?;
        tracing::info!(
            batch = view.id,
            commands = view.commands.len(),
            project = view.project.as_deref().map(tracing::field::display),
            "batch enqueued"
        );
        self.work.bump();
        Ok(view)
    }

    pub fn batch(&mut self, id: i64) -> Result<BatchView> {
        self.store.read(|tx| {
            let batch = tx
                .batch(id)?
                .ok_or_else(|| ServiceError::NotFound(format!("Пакета {id} нет")))?;
            batch_view(tx, batch)
        })
    }

    /// `GET /batches` and `batches list`: one page of batches, newest first, each with its
    /// counters and without its commands: at most `limit` (1 to [`BATCH_PAGE_MAX`], default
    /// [`BATCH_PAGE_DEFAULT`]), of one project when given, older than batch `before` when given
    /// (the next page starts before the last id of this one).
    pub fn batch_page(
        &mut self,
        project: Option<&str>,
        before: Option<i64>,
        limit: Option<i64>,
    ) -> Result<Vec<BatchSummary>> {
        let limit = limit.unwrap_or(BATCH_PAGE_DEFAULT);
        if !(1..=BATCH_PAGE_MAX).contains(&limit) {
            return Err(ValidationError::new(
                "limit",
                format!("ожидалось число от 1 до {BATCH_PAGE_MAX}"),
            )
            .into());
        }
        Ok(self
            .batch_summaries_before(project, None, before, limit)?
            .into_iter()
            .map(BatchSummary::from)
            .collect())
    }

    /// Every batch (the newest 500), newest first, of one project when given, with all its
    /// commands: for tools and tests in the process; the transports list pages of summaries
    /// ([`HubConnection::batch_page`]).
    pub fn batches(&mut self, project: Option<&str>) -> Result<Vec<BatchView>> {
        self.store.read(|tx| {
            tx.batches(project, None, 500)?
                .into_iter()
                .map(|batch| batch_view(tx, batch))
                .collect()
        })
    }

    /// Cancels a batch: its queued commands become cancelled; a claimed one keeps its delivery and
    /// takes the status its report brings. Cancelling again changes nothing; a batch that has
    /// already finished cannot be cancelled.
    pub fn cancel_batch(&mut self, id: i64) -> Result<BatchView> {
        let now = self.now();
        self.store.transact(|tx| {
            let batch = tx
                .batch(id)?
                .ok_or_else(|| ServiceError::NotFound(format!("Пакета {id} нет")))?;
            if batch.cancelled_at.is_none() {
                let commands = tx.commands_of_batch(id)?;
                if commands.iter().all(|c| c.status.is_terminal()) {
                    return Err(ServiceError::Conflict {
                        field: "batch".into(),
                        message: "пакет уже завершён, отменять нечего".into(),
                    });
                }
                let cancelled = tx.cancel_batch(id, &now)?;
                tracing::info!(batch = id, cancelled, "batch cancelled");
            }
            let batch = tx
                .batch(id)?
                .ok_or_else(|| ServiceError::NotFound(format!("Пакета {id} нет")))?;
            batch_view(tx, batch)
        })
    }

    /// `POST /commands/{id}/retry`: queues a `failed` or `skipped` command again, with the
    /// commands skipped because of it (its dependents, transitively). Each keeps its earlier
    /// outcome as an attempt; the delivery count goes on, and the batch's status follows. A
    /// command of a cancelled batch, one in another status, or one whose dependency failed too
    /// (retry that one: its dependents come with it) is refused.
    pub fn retry_command(&mut self, id: i64) -> Result<CommandView> {
        self.retry_command_as(id, false)
    }

    /// [`HubConnection::retry_command`]; `overwrite`: an edit stopped by a conflict writes the
    /// fields in conflict over Jira's values (see `edits`).
    pub(super) fn retry_command_as(&mut self, id: i64, overwrite: bool) -> Result<CommandView> {
        let now = self.now();
        self.store.transact(|tx| {
            let command = tx
                .command(id)?
                .ok_or_else(|| ServiceError::NotFound(format!("Команды {id} нет")))?;
            if !matches!(
                command.status,
                CommandStatus::Failed | CommandStatus::Skipped
            ) {
                return Err(retry_conflict(format!(
                    "пакет {}, команда {}: статус «{}»; повторить можно только команду со статусом «ошибка» или «пропущена»",
                    command.batch_id,
                    command.seq,
                    command.status.label()
                )));
            }
            let batch = tx.batch(command.batch_id)?.ok_or_else(|| {
                ServiceError::NotFound(format!("Пакета {} нет", command.batch_id))
            })?;
            refuse_retry_in_cancelled_batch(&batch)?;
            if let Some(dependency) = command.depends_on.map(|d| tx.command(d)).transpose()?.flatten()
                && dependency.status == CommandStatus::Cancelled
            {
                // A cancelled command is never retried, so this one would be skipped again at
                // once: said so, rather than "retry that one first".
                return Err(retry_conflict(format!(
                    "пакет {}, команда {} использует результат команды {}, которая отменена ({}): она не выполнится, и эта будет снова пропущена; поставьте нужные команды новым пакетом",
                    command.batch_id,
                    command.seq,
                    dependency.seq,
                    dependency.error.as_deref().unwrap_or("отменена")
                )));
            }
            if let Some(dependency) = command.depends_on.map(|d| tx.command(d)).transpose()?.flatten()
                && matches!(
                    dependency.status,
                    CommandStatus::Failed | CommandStatus::Skipped
                )
            {
                return Err(retry_conflict(format!(
                    "пакет {}, команда {} использует результат команды {} со статусом «{}»: повторите сначала её, эта пойдёт следом",
                    command.batch_id,
                    command.seq,
                    dependency.seq,
                    dependency.status.label()
                )));
            }
            super::edits::prepare_retry(tx, id, overwrite)?;
            let retried = requeue_with_dependents(tx, &command, &now)?;
            tracing::info!(batch = command.batch_id, command = command.seq, command_id = id, retried, "command retried");
            let row = tx
                .command(id)?
                .ok_or_else(|| ServiceError::NotFound(format!("Команды {id} нет")))?;
            let attempts = tx.attempts_of(id)?;
            Ok(CommandView::with_attempts(row, attempts))
        })
        .inspect(|_| self.work.bump())
    }

    /// `POST /batches/{id}/retry-failed`: queues every `failed` and `skipped` command of the
    /// batch again, as [`HubConnection::retry_command`] does for one. A batch with none, or a
    /// cancelled one, is refused.
    pub fn retry_failed(&mut self, batch_id: i64) -> Result<BatchView> {
        let now = self.now();
        self.store
            .transact(|tx| {
                let batch = tx
                    .batch(batch_id)?
                    .ok_or_else(|| ServiceError::NotFound(format!("Пакета {batch_id} нет")))?;
                refuse_retry_in_cancelled_batch(&batch)?;
                let mut retried = 0;
                let mut stranded = 0;
                // In the batch's order, so a dependency retried in this pass is queued before
                // its dependents are looked at. A command whose dependency stays failed, skipped
                // or cancelled (left as it is in Jira) would be skipped again at once: it is
                // not queued, and not counted as queued.
                for command in tx.commands_of_batch(batch_id)? {
                    if !matches!(
                        command.status,
                        CommandStatus::Failed | CommandStatus::Skipped
                    ) {
                        continue;
                    }
                    let dependency = command.depends_on.map(|d| tx.command(d)).transpose()?.flatten();
                    if dependency.is_some_and(|d| {
                        matches!(
                            d.status,
                            CommandStatus::Failed | CommandStatus::Skipped | CommandStatus::Cancelled
                        )
                    }) {
                        stranded += 1;
                        continue;
                    }
                    retried += usize::from(tx.retry_command(command.id, &now)?);
                }
                if retried == 0 && stranded > 0 {
                    return Err(retry_conflict(format!(
                        "в пакете {batch_id} нечего повторять: {stranded} пропущенных команд зависят от отменённых (оставлено как в Jira) и были бы снова пропущены; поставьте нужные команды новым пакетом"
                    )));
                }
                if retried == 0 {
                    return Err(retry_conflict(format!(
                        "в пакете {batch_id} нет команд со статусом «ошибка» или «пропущена»"
                    )));
                }
                tracing::info!(
                    batch = batch_id,
                    retried,
                    "failed commands of a batch retried"
                );
                batch_view(tx, batch)
            })
            .inspect(|_| self.work.bump())
    }

    /// Commands that ended `failed` or `skipped`, at most `limit` of the newest: what an
    /// operator may retry. Their batches newest first, each batch's commands in its order.
    pub fn failed_commands(&mut self, limit: i64) -> Result<Vec<CommandView>> {
        self.store.read(|tx| {
            let mut commands =
                tx.commands_with_status(&[CommandStatus::Failed, CommandStatus::Skipped], limit)?;
            // The newest failures pick the batches (newest first); a batch's commands are read
            // in its own order, oldest first («Ошибки» and `commands failed`).
            let mut batches: Vec<i64> = Vec::new();
            for command in &commands {
                if !batches.contains(&command.batch_id) {
                    batches.push(command.batch_id);
                }
            }
            commands.sort_by_key(|c| (batches.iter().position(|b| *b == c.batch_id), c.seq, c.id));
            let ids: Vec<i64> = commands.iter().map(|c| c.id).collect();
            Ok(with_attempts(commands, tx.attempts_of_commands(&ids)?))
        })
    }

    /// `POST /refresh` without `since`: a full refresh (see [`HubConnection::enqueue_refresh_of`]).
    pub fn enqueue_refresh(&mut self, project: Option<&str>, author: &str) -> Result<BatchView> {
        self.enqueue_refresh_of(project, author, RefreshSince::Full)
    }

    /// `POST /refresh`: a one-command batch refreshing the base JQL with every project's board,
    /// or one project's label with its board. [`RefreshSince::Last`] makes it incremental:
    /// `AND updated >= <epoch ms>` from the start of the last successful run of that scope (the
    /// base JQL's runs cover a project too) less an overlap of 10 minutes; full when there is none.
    pub fn enqueue_refresh_of(
        &mut self,
        project: Option<&str>,
        author: &str,
        since: RefreshSince,
    ) -> Result<BatchView> {
        Ok(self.refresh_of(project, author, since, false)?.0)
    }

    /// What `POST /refresh`, the console and `jira-hub refresh` call: like
    /// [`HubConnection::enqueue_refresh_of`], but when a refresh of the same scope (the same
    /// query and boards) is already queued or claimed in a batch not cancelled, that batch is
    /// answered and nothing is enqueued (`false`). A pending full refresh stands for an
    /// incremental one of its scope too, not the other way round.
    pub fn request_refresh(
        &mut self,
        project: Option<&str>,
        author: &str,
        since: RefreshSince,
    ) -> Result<(BatchView, bool)> {
        self.refresh_of(project, author, since, true)
    }

    fn refresh_of(
        &mut self,
        project: Option<&str>,
        author: &str,
        since: RefreshSince,
        reuse: bool,
    ) -> Result<(BatchView, bool)> {
        let settings = self.settings()?;
        let projects = self.store.projects()?;
        let base = base_jql(
            settings.project_key.as_deref(),
            projects.iter().map(|p| p.label.as_str()),
        );
        let (scope, boards, title) = match project {
            Some(label) => {
                let project = projects
                    .iter()
                    .find(|p| p.label == label)
                    .ok_or_else(|| ServiceError::NotFound(format!("Проекта «{label}» нет")))?;
                let key = settings.project_key.as_deref().ok_or_else(|| {
                    ValidationError::new(
                        "project_key",
                        "не задан ключ проекта Jira (настройка project_key)",
                    )
                })?;
                (
                    project_jql(key, &project.label),
                    project.board_id.into_iter().collect::<Vec<_>>(),
                    format!("Обновление зеркала: {label}"),
                )
            }
            None => {
                let jql = base.clone().ok_or_else(|| {
                    ValidationError::new(
                        "base_jql",
                        "базовой JQL нет: нужны project_key и хотя бы один проект",
                    )
                })?;
                let mut boards: Vec<i64> = projects.iter().filter_map(|p| p.board_id).collect();
                boards.sort_unstable();
                boards.dedup();
                (jql, boards, "Обновление зеркала".to_string())
            }
        };
        if reuse {
            let pending = self.store.read(|tx| tx.pending_refreshes())?;
            let same = pending.into_iter().find(|(_, params)| {
                let Some(jql) = params.get("jql").and_then(|j| j.as_str()) else {
                    return false;
                };
                let covers = jql == scope
                    || (since == RefreshSince::Last
                        && crate::domain::jql::split_incremental(jql)
                            .is_some_and(|(of, _)| of == scope));
                covers && params.get("boards") == Some(&json!(boards))
            });
            if let Some((batch, _)) = same {
                tracing::info!(batch, "a refresh of the same scope is pending: no new one");
                return Ok((self.batch(batch)?, false));
            }
        }
        let last = match since {
            RefreshSince::Full => None,
            RefreshSince::Last => {
                let mut scopes = vec![scope.as_str()];
                scopes.extend(base.as_deref().filter(|b| *b != scope));
                self.store.read(|tx| tx.last_complete_run(&scopes))?
            }
        };
        let (jql, title) = match last {
            Some(run) => (
                incremental_jql(&scope, incremental_since(run.started_at.at())),
                format!("{title} (изменения)"),
            ),
            None => (scope, title),
        };
        let view = self.enqueue_batch(&BatchRequest {
            title,
            author: author.to_string(),
            project: project.map(String::from),
            commands: vec![CommandRequestBody {
                command_type: "refresh".into(),
                params: json!({"jql": jql, "boards": boards}),
                depends_on: None,
            }],
        })?;
        Ok((view, true))
    }

    /// What the daemon's timer calls: enqueues a refresh of the base JQL when
    /// `auto_refresh_minutes` have passed since the last one (full or incremental) was enqueued
    /// and no refresh at all is queued or claimed ("never two at once": a refresh enqueued before
    /// a project was added has another query, and a project's refresh is part of the hub's scope
    /// too). It is full when no full run of today's base JQL succeeded in the last
    /// `full_refresh_hours` (the first one, or after a project was added), incremental otherwise.
    pub fn auto_refresh(&mut self) -> Result<Option<BatchView>> {
        let settings = self.settings()?;
        let Some(minutes) = settings.auto_refresh_period_minutes() else {
            return Ok(None);
        };
        let Some(jql) = self.base_jql()? else {
            return Ok(None);
        };
        let now = self.clock.now();
        let due = self.store.read(|tx| -> Result<bool> {
            if tx.any_refresh_pending()? {
                return Ok(false);
            }
            let last = tx.last_refresh_enqueued(&jql)?;
            let last = last.as_ref().map(crate::domain::time::Utc::at);
            Ok(last.is_none_or(|last| last + time::Duration::minutes(i64::from(minutes)) <= now))
        })?;
        if !due {
            return Ok(None);
        }
        let full_every = time::Duration::hours(i64::from(settings.full_refresh_hours));
        let full_due = self.store.read(|tx| -> Result<bool> {
            let last = tx.last_full_run_of(&jql)?;
            Ok(last.is_none_or(|run| run.started_at.at() + full_every <= now))
        })?;
        let since = if full_due {
            RefreshSince::Full
        } else {
            RefreshSince::Last
        };
        let view = self.enqueue_refresh_of(None, "jira-hub", since)?;
        tracing::info!(batch = view.id, at = %format_utc(now), since = %since.as_str(), "automatic refresh enqueued");
        Ok(Some(view))
    }
}
