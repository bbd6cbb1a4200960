//! A refresh's pages: mapped to mirror rows (in a pipeline beside the transaction that stores
//! them), the refresh completed, and what it no longer saw pruned or held.

use super::Now;
use super::runs::run_of;
use crate::domain::command::{RunKind, RunStatus};
use crate::domain::settings::Settings;
use crate::jira::{FieldIds, MirrorIssue, map_issue_text};
use crate::protocol::{AgentRequest, Page};
use crate::service::Result;
use crate::service::batches::base_jql_in;
use crate::store::{CommandRow, Tx};
use serde_json::{Value, json};

/// The refresh pages of a report mapped ahead of its transaction (by [`premap`], on another
/// thread while the relay applies the request before it), with the settings they were mapped
/// under. The transaction uses them only while those settings are still the stored ones;
/// otherwise it maps the pages itself.
pub(crate) struct Premapped {
    field_ids: std::collections::BTreeMap<String, String>,
    epic_names: Vec<String>,
    /// By the report's result index: that result's page, mapped issue by issue, in order.
    pages: Vec<Option<Vec<Mapped>>>,
}

/// One issue of a page, mapped for the mirror, or why it cannot be stored.
pub(super) type Mapped = std::result::Result<MirrorIssue, String>;

impl Premapped {
    /// The mapped page of result `index`, when it was mapped under `settings`.
    pub(super) fn take_page(&mut self, index: usize, settings: &Settings) -> Option<Vec<Mapped>> {
        let same = self.field_ids == settings.field_ids && self.epic_names == epic_names(settings);
        same.then(|| self.pages.get_mut(index)?.take()).flatten()
    }
}

/// Maps the refresh pages a request carries, as `settings` say (`None` when it carries none).
pub(crate) fn premap(request: &AgentRequest, settings: &Settings) -> Option<Premapped> {
    let AgentRequest::Report(report) = request else {
        return None;
    };
    if report.results.iter().all(|result| result.page.is_none()) {
        return None;
    }
    let ids = FieldIds::from_setting(&settings.field_ids);
    let names = epic_names(settings);
    let pages = report
        .results
        .iter()
        .map(|result| {
            let page = result.page.as_ref()?;
            Some(
                page.issues
                    .iter()
                    .map(|raw| map_issue_text(raw.get(), &ids, &names))
                    .collect(),
            )
        })
        .collect();
    Some(Premapped {
        field_ids: settings.field_ids.clone(),
        epic_names: names.into_iter().map(String::from).collect(),
        pages,
    })
}

/// The names of the issue types that are epics, which the mapping of a parent needs.
fn epic_names(settings: &Settings) -> Vec<&str> {
    settings
        .issue_types
        .iter()
        .map(|t| t.epic.name.as_str())
        .collect()
}

/// What the pages of one report did to the mirror, for the metrics.
#[derive(Debug, Default)]
pub(super) struct Ingested {
    /// Refresh pages applied.
    pub(super) pages: u64,
    pub(super) stored: u64,
    /// Issues of a page the hub could not map or could not give back (logged each).
    pub(super) not_stored: u64,
}

/// Pages of this many issues or more are mapped on a second thread while they are stored.
const PIPELINE_FROM: usize = 64;
/// The mapping thread hands issues over this many at a time: one wake-up per issue would cost
/// more than the mapping of it.
const MAP_CHUNK: usize = 50;

pub(super) fn ingest_page(
    tx: &Tx<'_>,
    settings: &Settings,
    command: &CommandRow,
    page: &Page,
    premapped: Option<Vec<Mapped>>,
    now: &Now,
    ingested: &mut Ingested,
) -> Result<()> {
    let run = run_of(tx, command, now)?;
    let ids = FieldIds::from_setting(&settings.field_ids);
    let epic_names = epic_names(settings);
    // `received`: the issues of the page the hub can name (stored, or kept as they were); one
    // it cannot name is not counted, so a run that had one reads as incomplete.
    let (mut received, mut stored, mut changed) = (0, 0, 0);
    let mut unstored: Vec<String> = Vec::new();
    // The hub's clock may step back during a run (an NTP correction): what the run received is
    // stamped no earlier than its start, or its end would take it for an issue it missed.
    let synced_at = if now.utc.at() < run.started_at.at() {
        &run.started_at
    } else {
        &now.utc
    };
    let mut writer = tx.issue_writer()?;
    let mut store = |index: usize, mapped: Mapped| -> Result<()> {
        match mapped {
            Ok(issue) => {
                let upserted = writer.upsert(&issue, synced_at)?;
                received += 1;
                stored += 1;
                changed += i64::from(upserted.changed);
                if upserted.moved_from_other_key {
                    tracing::info!(
                        key = %issue.mirrored.key,
                        "an issue came under a new key (moved in Jira); its notes and links follow it"
                    );
                }
            }
            Err(reason) => {
                ingested.not_stored += 1;
                tracing::warn!(command = command.id, %reason, "an issue of a refresh page was not stored");
                // Jira returned it: it is in the scope, and its row (if any) stays as it was.
                if let Some(key) = page.issues.get(index).and_then(|raw| issue_key(raw.get())) {
                    received += 1;
                    unstored.push(key);
                }
            }
        }
        Ok(())
    };
    let (ids, epic_names) = (&ids, &epic_names);
    let map = |raw: &crate::protocol::RawJson| map_issue_text(raw.get(), ids, epic_names);
    if let Some(premapped) = premapped.filter(|issues| issues.len() == page.issues.len()) {
        for (index, issue) in premapped.into_iter().enumerate() {
            store(index, issue)?;
        }
    } else if page.issues.len() < PIPELINE_FROM {
        for (index, raw) in page.issues.iter().enumerate() {
            store(index, map(raw))?;
        }
    } else {
        // A second thread maps the page's issues, in order, while this one stores them.
        std::thread::scope(|scope| -> Result<()> {
            let (sender, mapped) = std::sync::mpsc::sync_channel::<Vec<_>>(4);
            let mapper = std::thread::Builder::new()
                .name("ingest-map".into())
                .spawn_scoped(scope, move || {
                    for chunk in page.issues.chunks(MAP_CHUNK) {
                        // The receiver is gone when storing failed: nothing more is wanted.
                        if sender.send(chunk.iter().map(&map).collect()).is_err() {
                            break;
                        }
                    }
                });
            if mapper.is_err() {
                for (index, raw) in page.issues.iter().enumerate() {
                    store(index, map(raw))?;
                }
                return Ok(());
            }
            for (index, issue) in mapped.into_iter().flatten().enumerate() {
                store(index, issue)?;
            }
            Ok(())
        })?;
    }
    for key in &unstored {
        tx.note_unstored(run.id, key)?;
    }
    tx.count_run_page(run.id, received, changed, page.total)?;
    ingested.stored += stored;
    ingested.pages += 1;
    Ok(())
}

/// The key of a raw issue the mapping refused, when it has one.
fn issue_key(raw: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Keyed {
        key: Option<String>,
    }
    serde_json::from_str::<Keyed>(raw)
        .ok()?
        .key
        .filter(|key| !key.trim().is_empty())
}

/// A refresh reported done: its run closes; the boards' types are recorded; a full run (its query
/// is the base JQL now) removes the issues it did not return.
pub(super) fn complete_refresh(
    tx: &Tx<'_>,
    settings: &Settings,
    command: &CommandRow,
    result: Option<&Value>,
    now: &Now,
) -> Result<()> {
    let run = run_of(tx, command, now)?;
    let boards = result
        .and_then(|r| r.get("boards"))
        .and_then(Value::as_array);
    for board in boards.into_iter().flatten() {
        let id = board.get("id").and_then(Value::as_i64);
        let board_type = board
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| matches!(*t, "scrum" | "kanban"));
        if let (Some(id), Some(board_type)) = (id, board_type) {
            tx.set_board_type(id, board_type)?;
        }
    }
    // Pruning needs a run that was full when it started and whose query is still the whole
    // scope: a project added meanwhile has issues this run never asked for. An incremental run
    // never prunes: it returns only what changed.
    let full =
        run.kind == RunKind::Full && base_jql_in(tx, settings)?.is_some_and(|jql| jql == run.query);
    if full {
        let received = tx.received_by_run(run.id, &run.started_at)?;
        if let Some(short) = short_of_total(&run, result, received) {
            tracing::warn!(run = run.id, %short, "a full refresh did not receive everything it was told of: nothing is removed");
            let message = format!(
                "из зеркала ничего не удалено: {short}; недостающие задачи — не доказательство, что их нет в Jira. Следующее полное обновление прочтёт всё заново"
            );
            tx.finish_run(run.id, RunStatus::Failed, &now.utc, Some(&message))?;
            return Ok(());
        }
        return prune_or_hold(tx, settings, &run, now);
    }
    tx.finish_run(run.id, RunStatus::Done, &now.utc, None)?;
    Ok(())
}

/// Why a full run received fewer issues than it was told of, if it did: Jira's `total` (Data
/// Center gives one on every page; the largest is kept) or the agent's own count of the issues
/// it sent (its `result.total`, given only once the search reached its last page: Cloud's
/// `isLast`, Data Center's last key), whichever is larger, against the issues the hub received
/// and could name, each once (`received`).
fn short_of_total(
    run: &crate::store::RunRow,
    result: Option<&Value>,
    received: u64,
) -> Option<String> {
    let sent = result.and_then(|r| r.get("total")).and_then(Value::as_u64);
    let jira = run.total.and_then(|t| u64::try_from(t).ok());
    let words = |n| crate::domain::words::count(n, &crate::domain::words::ISSUES_GENITIVE);
    match (jira, sent) {
        (Some(jira), _) if received < jira => Some(format!(
            "получено {received} из {}, о которых сообщила Jira",
            words(jira)
        )),
        (_, Some(sent)) if received < sent => Some(format!(
            "получено {received} из {}, отправленных агентом",
            words(sent)
        )),
        _ => None,
    }
}

/// The end of a full run: the issues it missed leave the mirror, unless in some
/// project they are more than `prune_guard` allows, or all of its issues. Then the run ends
/// `held` with what it would remove, and nothing is removed until an operator confirms it. A
/// later full run that misses the same issues does not confirm it (the same wrong
/// answer twice, a permission lost or a filter changed, is no proof): it is held in its turn
/// and supersedes the older one.
fn prune_or_hold(
    tx: &Tx<'_>,
    settings: &Settings,
    run: &crate::store::RunRow,
    now: &Now,
) -> Result<()> {
    let labels: Vec<String> = tx.projects()?.into_iter().map(|p| p.label).collect();
    let preview = tx.prune_preview(run.id, &run.started_at, &labels)?;
    let guard = settings.prune_guard;
    let over: Vec<&(String, u64, u64)> = preview
        .by_label
        .iter()
        .filter(|(_, total, missing)| guard.holds(*missing, *total))
        .collect();
    if !over.is_empty() {
        let projects = serde_json::to_string(
            &over
                .iter()
                .map(|(label, total, missing)| json!({"label": label, "issues": total, "missing": missing}))
                .collect::<Vec<_>>(),
        )
        .map_err(crate::store::StoreError::from)?;
        let words: Vec<String> = over
            .iter()
            .map(|(label, total, missing)| format!("{label}: {missing} из {total}"))
            .collect();
        let message = format!(
            "удаление {} из зеркала ждёт подтверждения ({}; предел prune_guard: больше {}% проекта и не меньше {} задач или больше половины проекта, а также все задачи проекта): jira-hub refresh confirm {}",
            crate::domain::words::count(
                preview.keys.len() as u64,
                &crate::domain::words::ISSUES_GENITIVE
            ),
            words.join(", "),
            guard.max_percent,
            guard.min_issues,
            run.id
        );
        tracing::warn!(
            run = run.id,
            would_remove = preview.keys.len(),
            "a full refresh would remove too much of the mirror: held for a confirmation"
        );
        tx.supersede_held(
            run.id,
            &format!("заменён более новым полным обновлением №{}", run.id),
        )?;
        tx.hold_prune(run.id, &preview.keys, &projects, &now.utc)?;
        tx.finish_run(run.id, RunStatus::Held, &now.utc, Some(&message))?;
        return Ok(());
    }
    let removed = tx.prune_unseen(run.id, &run.started_at)?;
    tx.supersede_held(
        run.id,
        &format!("заменён более новым полным обновлением №{}", run.id),
    )?;
    if removed > 0 {
        tracing::info!(
            removed,
            "issues that left the hub's scope were removed from the mirror"
        );
    }
    tx.finish_run(run.id, RunStatus::Done, &now.utc, None)?;
    Ok(())
}
