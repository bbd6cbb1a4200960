//! The console's smaller pages (failed commands, the mirror and a project's slice, an issue, the
//! refreshes, a refusal) and the pieces the pages share. Every page is written with maud's
//! `html!` (see `html.rs`); the parts that change while the page is open are `data-live`
//! sections with an id, which the page's script replaces in place.

use super::html::{
    Text, clip, command_status_words, jira_time_of, millis_words, run_kind_words, run_status_words,
    segment, time_of,
};
use crate::domain::command::{BatchStatus, RunStatus};
use crate::domain::words::{self, COMMANDS as COMMAND_FORMS};
use crate::service::{
    BatchView, IssueView, ProjectIssues, ProjectView, QueuedRefresh, SliceRow, SyncRunView,
};
use maud::{Markup, html};
use std::fmt::Write as _;
use time::OffsetDateTime;

/// The unit of the charts of commands.
pub(super) const COMMANDS: super::charts::Unit = &COMMAND_FORMS;

/// A running refresh with no page from the agent for this long is flagged as stalled: a page of
/// Jira's search takes seconds, a pause Jira asks for (429) at most a few minutes.
pub(super) const REFRESH_STALLED_SECONDS: i64 = 10 * 60;

/// How many rows of a slice one page shows (the next are a link away).
pub(super) const SLICE_ROWS: usize = 200;

/// A text that may be missing: the text, or a dash.
pub(super) fn or_dash(value: Option<&str>) -> Markup {
    html! {
        @match value {
            Some(value) => (Text(value)),
            None => "—",
        }
    }
}

/// The counters that are not zero, in words: `выполнена 3 · ошибка 1`.
pub(super) fn counter_words<'a>(
    counters: impl IntoIterator<Item = (&'a &'static str, &'a usize)>,
) -> Markup {
    let shown: Vec<(&str, usize)> = counters
        .into_iter()
        .filter(|(_, n)| **n > 0)
        .map(|(status, n)| (*status, *n))
        .collect();
    html! {
        @if shown.is_empty() {
            "нет команд"
        }
        @for (i, (status, n)) in shown.iter().enumerate() {
            @if i > 0 { " " }
            span class={ "st st-" (status) } { (command_status_words(status)) ": " (n) }
        }
    }
}

/// A batch's status as the console shows it: a batch that completed with failed or skipped
/// commands is «завершён с ошибками», not the green «завершён».
pub(super) fn batch_status_words(view: &BatchView) -> (String, &'static str) {
    let failed = view.counters.get("failed").copied().unwrap_or(0)
        + view.counters.get("skipped").copied().unwrap_or(0);
    if view.status == BatchStatus::Completed && failed > 0 {
        ("bs bs-completed-failed".to_string(), "завершён с ошибками")
    } else {
        (format!("bs bs-{}", view.status), view.status_label)
    }
}

pub(super) fn status_badge(status: &str) -> Markup {
    html! {
        span class={ "st st-" (Text(status)) } { (Text(command_status_words(status))) }
    }
}

/// How long a run took (or has taken so far), in milliseconds.
pub(super) fn run_millis(run: &SyncRunView, now: OffsetDateTime) -> i64 {
    let end = run.run.finished_at.as_ref().map_or(now, |f| f.at());
    (end - run.run.started_at.at()).whole_milliseconds().max(0) as i64
}

/// A refresh as people name it: by its batch (a refresh is a batch with a run), linked to the
/// batch's page; a run without a batch (its command pruned long ago) by its run.
pub(super) fn refresh_name(run: &SyncRunView) -> Markup {
    html! {
        @match run.run.batch_id {
            Some(batch) => a href={ "/ui/batches/" (batch) } { "пакет " (batch) },
            None => { "прогон " (run.run.id) }
        }
    }
}

/// What a running refresh has done so far.
pub(super) fn run_progress(run: &SyncRunView, now: OffsetDateTime) -> Markup {
    html! {
        li.progress {
            "Обновление, " (refresh_name(run)) " (" (run_kind_words(run.kind)) "): идёт "
            (millis_words(run_millis(run, now))) ", страниц: " b { (run.run.pages) }
            ", задач получено: " b { (run.run.issues_seen) }
            @if let Some(total) = run.run.total { " из " (total) }
            ", изменилось: " (run.run.issues_changed)
        }
    }
}

/// The refreshes waiting in the queue: each by its batch, where it stands, and «ждёт агента»
/// when no agent is about to take it.
pub(super) fn queued_refresh_lines(queued: &[QueuedRefresh], now: OffsetDateTime) -> Markup {
    if queued.is_empty() {
        return html! {};
    }
    html! {
        ul.runs.queued {
            @for refresh in queued {
                li.queued-refresh id={ "queued-refresh-" (refresh.batch_id) } {
                    "Обновление, " a href={ "/ui/batches/" (refresh.batch_id) } { "пакет " (refresh.batch_id) }
                    ": ждёт в очереди, "
                    @if refresh.position == 1 {
                        "следующее"
                    } @else {
                        "перед ним " (words::count(refresh.position as u64 - 1, &COMMAND_FORMS))
                    }
                    " (поставлено " (time_of(&refresh.queued_at, now)) ")"
                    @if refresh.no_agent {
                        " · " b.bad { "ждёт агента" } ": агента нет на связи"
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Mirror

pub(super) fn mirror(projects: &[ProjectIssues], total: i64) -> Markup {
    html! {
        section #mirror-projects data-live {
            p { "Задач в зеркале всего: " b { (total) } }
            @if projects.is_empty() {
                p { "Проектов нет." }
            } @else {
                div.scroll {
                    table {
                        thead { tr { th { "Метка" } th { "Название" } th { "Доска" } th { "Задач" } } }
                        tbody {
                            @for p in projects {
                                tr {
                                    td { a href={ "/ui/mirror/" (segment(&p.project.label)) } { (Text(&p.project.label)) } }
                                    td { (Text(&p.project.name)) }
                                    td {
                                        @match (p.project.board_id, &p.project.board_type) {
                                            (Some(id), Some(kind)) => { (id) " (" (Text(kind)) ")" }
                                            (Some(id), None) => (id),
                                            (None, _) => "—",
                                        }
                                    }
                                    td.num { (p.issues) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// An issue key's parts for sorting: the project, then the number as a number (`AURORA-9`
/// before `AURORA-10`); a key of another shape sorts by its text after them.
fn key_order(key: &str) -> (&str, u64, &str) {
    match key.rsplit_once('-') {
        Some((project, number)) if number.bytes().all(|b| b.is_ascii_digit()) => {
            (project, number.parse().unwrap_or(u64::MAX), "")
        }
        _ => ("\u{10FFFF}", 0, key),
    }
}

/// A project's slice: its issues sorted by key number, found by a search box (key, summary,
/// status, assignee), one page of [`SLICE_ROWS`] at a time.
pub(super) fn slice(rows: &[SliceRow], label: &str, query: Option<&str>, page: usize) -> Markup {
    let own = rows.iter().filter(|r| !r.neighbor).count();
    let query = query.map(str::trim).filter(|q| !q.is_empty());
    let wanted = query.map(str::to_lowercase);
    let mut found: Vec<&SliceRow> = rows
        .iter()
        .filter(|row| {
            let Some(wanted) = &wanted else { return true };
            let issue = &row.issue;
            [
                Some(issue.key.as_str()),
                Some(issue.summary.as_str()),
                Some(issue.status.as_str()),
                issue.assignee.as_deref(),
            ]
            .into_iter()
            .flatten()
            .any(|text| text.to_lowercase().contains(wanted.as_str()))
        })
        .collect();
    found.sort_by(|a, b| {
        (a.neighbor, key_order(&a.issue.key)).cmp(&(b.neighbor, key_order(&b.issue.key)))
    });
    let pages = found.len().div_ceil(SLICE_ROWS).max(1);
    let page = page.clamp(1, pages);
    let link = |n: usize| {
        let mut href = format!("/ui/mirror/{}?page={n}", segment(label));
        if let Some(query) = query {
            let _ = write!(href, "&q={}", segment(query));
        }
        href
    };
    html! {
        form method="get" action={ "/ui/mirror/" (segment(label)) } class="filter" role="search" {
            label {
                "Найти "
                input type="search" name="q" value=(Text(query.unwrap_or_default()))
                    placeholder="ключ, название, статус, исполнитель";
            }
            " "
            button type="submit" { "Искать" }
        }
        section #slice data-live {
            p {
                "Своих задач: " b { (own) } ", соседних: " b { (rows.len() - own) } "."
                @if let Some(query) = query {
                    " Найдено по «" (Text(query)) "»: " b { (found.len()) } "."
                }
            }
            div.scroll {
                table {
                    thead {
                        tr {
                            th { "Ключ" } th { "Тип" } th { "Статус" } th { "Название" }
                            th { "Исполнитель" } th { "Отметки" }
                        }
                    }
                    tbody {
                        @for row in found.iter().skip((page - 1) * SLICE_ROWS).take(SLICE_ROWS) {
                            @let issue = &row.issue;
                            @let marks: Vec<&str> = [(row.neighbor, "соседняя"), (row.closed, "закрыта")]
                                .into_iter()
                                .filter_map(|(on, mark)| on.then_some(mark))
                                .collect();
                            tr {
                                td { a href={ "/ui/issues/" (segment(&issue.key)) } { (Text(&issue.key)) } }
                                td { (Text(&issue.issue_type)) }
                                td { (Text(&issue.status)) }
                                td { (Text(&clip(&issue.summary, 200))) }
                                td { (or_dash(issue.assignee.as_deref())) }
                                td { (marks.join(", ")) }
                            }
                        }
                    }
                }
            }
            @if pages > 1 {
                nav.pages aria-label="Страницы" {
                    @if page > 1 {
                        a rel="prev" href=(Text(&link(page - 1))) { "← назад" } " "
                    }
                    span { "страница " (page) " из " (pages) }
                    @if page < pages {
                        " " a rel="next" href=(Text(&link(page + 1))) { "дальше →" }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// An issue

pub(super) fn issue(view: &IssueView, csrf: &str, now: OffsetDateTime) -> Markup {
    let i = &view.issue;
    html! {
        section #issue-facts data-live {
            p.summary { (Text(&i.summary)) }
            dl.facts {
                dt { "Тип" } dd { (Text(&i.issue_type)) }
                dt { "Статус" } dd { (Text(&i.status)) @if view.closed { " (закрыта)" } }
                dt { "Приоритет" } dd { (or_dash(i.priority.as_deref())) }
                dt { "Исполнитель" } dd { (or_dash(i.assignee.as_deref())) }
                dt { "Автор" } dd { (or_dash(i.reporter.as_deref())) }
                dt { "Метки" } dd { (Text(&i.labels.join(", "))) }
                dt { "Эпик" } dd { (or_dash(i.epic_key.as_deref())) }
                dt { "Спринт" } dd { (or_dash(i.sprint.as_deref())) }
                dt { "Срок" } dd { (or_dash(i.duedate.as_deref())) }
                dt { "В зеркале с" } dd { (time_of(&view.synced_at, now)) }
            }
            @if let Some(description) = &i.description {
                h2 { "Описание" } div.text { (Text(description)) }
            }
            h2 { "Связи" }
            @if view.links.is_empty() {
                p { "Связей нет." }
            } @else {
                ul {
                    @for link in &view.links {
                        (link_line(view, link))
                    }
                }
            }
            h2 { "Комментарии Jira" }
            @if view.comments.is_empty() {
                p { "Комментариев нет." }
            }
            @for c in &view.comments {
                div.comment {
                    p.meta {
                        (or_dash(c.author.as_deref())) " · "
                        @match c.created.as_deref() {
                            Some(text) => (jira_time_of(text, now)),
                            None => "—",
                        }
                    }
                    div.text { (Text(&c.body)) }
                }
            }
        }
        section #notes data-live {
            h2 { "Заметки хаба" }
            @if view.notes.is_empty() {
                p { "Заметок нет." }
            }
            @for n in &view.notes {
                div.note {
                    p.meta { (Text(&n.author)) " · " (time_of(&n.created_at, now)) }
                    div.text { (Text(&n.body)) }
                }
            }
        }
        form method="post" action={ "/ui/issues/" (segment(&i.key)) "/notes" } class="note-form" {
            input type="hidden" name="csrf" value=(Text(csrf));
            label for="note-author" { "Автор" }
            input #note-author name="author" required maxlength="100";
            label for="note-body" { "Заметка (в Jira не уходит)" }
            textarea #note-body name="body" rows="4" required {}
            button type="submit" { "Добавить заметку" }
        }
    }
}

/// One link of an issue: the direction in Russian from this issue's side («Блокирует
/// AURORA-2», «Заблокирована задачей AURORA-1»), Jira's name quoted otherwise.
fn link_line(view: &IssueView, link: &crate::service::IssueLinkView) -> Markup {
    let outward = link.direction == "outward";
    let known = crate::domain::words::link_directions(&link.link_type).is_some();
    // A type the table does not know speaks Jira's own words for its direction, as the
    // issue's raw `issuelinks` carry them (`type.outward`/`type.inward`): «haunts».
    let jira_words = (!known)
        .then(|| jira_link_words(&view.fields, &link.link_type, outward))
        .flatten();
    let direction = match &jira_words {
        Some(words) => format!("Связь «{}»: «{words}»", link.link_type),
        None => crate::domain::words::capitalized(&crate::domain::words::link_direction(
            &link.link_type,
            outward,
        )),
    };
    html! {
        li {
            (Text(&direction)) " "
            @if link.other_in_mirror {
                a href={ "/ui/issues/" (segment(&link.other_key)) } { (Text(&link.other_key)) }
            } @else {
                (Text(&link.other_key)) " (нет в зеркале)"
            }
            // Jira's name beside the Russian words; the fallback already quotes it.
            @if known {
                " " span.hint { "(«" (Text(&link.link_type)) "»)" }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Sync runs

/// A held refresh as people name it: by its batch, with its run; by its run alone when it has no
/// batch (a run older than `sync_run.batch_id`).
fn held_name(run: &crate::service::HeldRunView) -> Markup {
    html! {
        @if let Some(batch) = run.batch_id {
            a href={ "/ui/batches/" (batch) } { "пакет " (batch) } ", "
        }
        "прогон " (run.run_id)
    }
}

/// The full refreshes whose removals wait for an operator, on the overview.
pub(super) fn held_card(held: &[crate::service::HeldRunView]) -> Markup {
    if held.is_empty() {
        return html! {};
    }
    html! {
        article.card {
            h2 { "Удаление ждёт подтверждения" }
            @for run in held {
                p.bad {
                    "Полное обновление (" (held_name(run)) ") удалило бы из зеркала "
                    b { (words::count(run.would_remove.max(0) as u64, &words::ISSUES_ACCUSATIVE)) }
                    " — больше, чем позволяет prune_guard. "
                    a href="/ui/runs#held" { "Проверить и подтвердить" } "."
                }
            }
        }
    }
}

/// The held runs with their confirm buttons, on the runs page.
fn held_section(held: &[crate::service::HeldRunView], csrf: &str) -> Markup {
    if held.is_empty() {
        return html! {};
    }
    html! {
        section #held {
            h2 { "Удаление ждёт подтверждения" }
            @for run in held {
                @let projects: Vec<String> = run
                    .projects
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        format!(
                            "{}: {} из {}",
                            p["label"].as_str().unwrap_or(""),
                            p["missing"],
                            p["issues"]
                        )
                    })
                    .collect();
                p {
                    "Обновление (" (held_name(run)) ") удалило бы "
                    b { (words::count(run.would_remove.max(0) as u64, &words::ISSUES_ACCUSATIVE)) }
                    " (" (Text(&projects.join(", "))) "); например: " (Text(&run.sample_keys.join(", "))) "."
                }
                p.actions {
                    (super::html::form(
                        &format!("/ui/sync-runs/{}/confirm", run.run_id),
                        csrf,
                        &[],
                        "Подтвердить удаление",
                        "danger",
                    ))
                }
            }
        }
    }
}

pub(super) fn runs_with_held(
    runs: &[SyncRunView],
    projects: &[ProjectView],
    held: &[crate::service::HeldRunView],
    queued: &[QueuedRefresh],
    csrf: &str,
    now: OffsetDateTime,
) -> Markup {
    let running: Vec<&SyncRunView> = runs
        .iter()
        .filter(|r| r.run.status == RunStatus::Running)
        .collect();
    html! {
        (held_section(held, csrf))
        form method="post" action="/ui/refresh" class="filter" {
            input type="hidden" name="csrf" value=(Text(csrf));
            label {
                "Что обновить "
                select name="project" {
                    option value="" { "все проекты" }
                    @for p in projects {
                        option value=(Text(&p.label)) { (Text(&p.name)) " (" (Text(&p.label)) ")" }
                    }
                }
            }
            " "
            button type="submit" { "Обновить сейчас" }
        }
        section #runs data-live {
            @if !queued.is_empty() {
                h2 { "В очереди" }
                (queued_refresh_lines(queued, now))
            }
            @if !running.is_empty() {
                h2 { "Идёт" }
                ul.runs {
                    @for run in running { (run_progress(run, now)) }
                }
            }
            @if runs.is_empty() {
                p { "Обновлений ещё не было." }
            } @else {
                div.scroll {
                    table {
                        thead {
                            tr {
                                th { "Обновление" } th { "Прогон" } th { "Вид" } th { "Статус" }
                                th { "Начат" } th { "Длился" } th { "Получено" } th { "Изменено" }
                                th { "Запрос" } th { "Ошибка" }
                            }
                        }
                        tbody {
                            @for run in runs {
                                tr id={ "run-" (run.run.id) } {
                                    td { (refresh_name(run)) }
                                    td.num { (run.run.id) }
                                    td { (run_kind_words(run.kind)) }
                                    td class={ "rs rs-" (run.run.status.as_str()) } { (run_status_words(run.run.status)) }
                                    td { (time_of(&run.run.started_at, now)) }
                                    td.duration { (millis_words(run_millis(run, now))) }
                                    td.num { (run.run.issues_seen) }
                                    td.num { (run.run.issues_changed) }
                                    td { code { (Text(&clip(&run.run.query, 200))) } }
                                    td {
                                        @match run.run.error.as_deref() {
                                            Some(e) => span.error { (Text(&clip(e, 300))) },
                                            None => "—",
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A refusal or failure of an action, with a way back.
pub(super) fn problem(message: &str, back: &str) -> Markup {
    html! {
        p.error role="alert" { (Text(message)) }
        p { a href=(Text(back)) { "Назад" } }
    }
}

/// Jira's words for one direction of a link type (`type.outward` from the link's source,
/// `type.inward` from its target), as an issue's raw `issuelinks` carry them.
fn jira_link_words(fields: &serde_json::Value, type_name: &str, outward: bool) -> Option<String> {
    let side = if outward { "outward" } else { "inward" };
    fields
        .get("issuelinks")?
        .as_array()?
        .iter()
        .map(|link| &link["type"])
        .find(|kind| kind["name"].as_str() == Some(type_name))
        .and_then(|kind| kind[side].as_str())
        .map(str::trim)
        .filter(|words| !words.is_empty())
        .map(str::to_string)
}
