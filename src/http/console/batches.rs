//! The batches' pages: the list with its filter, one batch with its commands, the question before
//! cancelling one, and a command's own page (its conflict from `conflict.rs`).

use super::html::{
    NBSP, Text, clip, command_ref, command_type_words, duration_words, form, millis_words,
    run_kind_words, run_status_words, segment, time_of,
};
use super::pages::{
    batch_status_words, counter_words, or_dash, refresh_name, run_millis, status_badge,
};
use crate::domain::command::{BatchStatus, CommandStatus};
use crate::domain::words::{self, COMMANDS as COMMAND_FORMS, TIMES};
use crate::service::{BatchView, CommandPage, CommandView, FailedBatch, ProjectView};
use maud::{Markup, html};
use time::OffsetDateTime;

/// Statuses of a batch a list can be filtered by.
const BATCH_FILTERS: &[BatchStatus] = &[
    BatchStatus::Queued,
    BatchStatus::Running,
    BatchStatus::Completed,
    BatchStatus::Cancelled,
];

/// The list with its filter.
pub(super) fn batches(
    list: &[BatchView],
    projects: &[ProjectView],
    project: Option<&str>,
    status: Option<BatchStatus>,
    limit: i64,
    now: OffsetDateTime,
) -> Markup {
    html! {
        form method="get" action="/ui/batches" class="filter" {
            label {
                "Проект "
                select name="project" {
                    option value="" { "все" }
                    @for p in projects {
                        option value=(Text(&p.label)) selected[project == Some(p.label.as_str())] {
                            (Text(&p.name)) " (" (Text(&p.label)) ")"
                        }
                    }
                }
            }
            " "
            label {
                "Статус "
                select name="status" {
                    option value="" { "любой" }
                    @for value in BATCH_FILTERS {
                        option value=(value.to_string()) selected[status == Some(*value)] { (value.label()) }
                    }
                }
            }
            " "
            button type="submit" { "Показать" }
        }
        section #batch-list data-live {
            p.hint { "Последние " (limit) " пакетов, новые сверху." }
            @if list.is_empty() {
                p { "Пакетов нет." }
            } @else {
                div.scroll {
                    table {
                        thead {
                            tr {
                                th { "№" } th { "Название" } th { "Проект" } th { "Автор" }
                                th { "Создан" } th { "Статус" } th { "Команды" }
                            }
                        }
                        tbody {
                            @for b in list {
                                @let (class, label) = batch_status_words(b);
                                tr {
                                    td { a href={ "/ui/batches/" (b.id) } { (b.id) } }
                                    td { a href={ "/ui/batches/" (b.id) } { (Text(&b.title)) } }
                                    td { (or_dash(b.project.as_deref())) }
                                    td { (Text(&b.author)) }
                                    td { (time_of(&b.created_at, now)) }
                                    td class=(class) { (label) }
                                    td {
                                        (counter_words(&b.counters)) " (всего "
                                        (b.counters.values().sum::<usize>()) ")"
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

/// A command's params or result, short, with a space after each `,` and `:` between members so
/// that a long one wraps between them rather than inside a word.
fn json_text(value: &serde_json::Value) -> String {
    let mut bytes = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"");
    let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, formatter);
    let text = match serde::Serialize::serialize(value, &mut serializer) {
        // A newline can only be between members: inside strings it is written `\n`.
        Ok(()) => String::from_utf8_lossy(&bytes).replace('\n', " "),
        Err(_) => value.to_string(),
    };
    clip(&text, 160)
}

/// One member's value for people: an issue key a link to its page, text as it is (clipped),
/// a dependency's result in words, other JSON compact.
fn member_html(name: &str, member: &serde_json::Value) -> Markup {
    match member {
        serde_json::Value::String(text)
            if matches!(name, "key" | "from" | "to" | "parent")
                && crate::domain::command::is_issue_key(text) =>
        {
            html! { a href={ "/ui/issues/" (segment(text)) } { (Text(text)) } }
        }
        serde_json::Value::String(text) => {
            html! { span.value { (Text(&clip(text, 160))) } }
        }
        serde_json::Value::Object(o)
            if o.len() == 1 && o.get("$result").is_some_and(|r| r == "key") =>
        {
            html! { "ключ из результата зависимости" }
        }
        other => html! { code.json { (Text(&json_text(other))) } },
    }
}

/// A link command's params as what the link will say, its direction in Russian between its keys
///: «AURORA-1 блокирует AURORA-2»; `None` for params that are not a link's.
fn link_html(params: &serde_json::Value) -> Option<Markup> {
    let link_type = params.get("type")?.as_str()?;
    let (from, to) = (params.get("from")?, params.get("to")?);
    Some(html! {
        (member_html("from", from)) " "
        (Text(&crate::domain::words::link_direction(link_type, true))) " "
        (member_html("to", to))
    })
}

/// A command's params or result for people: each member as «name: value» («задача: AURORA-7»,
/// the key a link to its page), in Russian where the name is the hub's own; other JSON as it is,
/// compact (no raw JSON, keys as links).
fn members_html(value: &serde_json::Value) -> Markup {
    let Some(members) = value.as_object() else {
        return html! { code.json { (Text(&json_text(value))) } };
    };
    if members.is_empty() {
        return html! { "—" };
    }
    html! {
        @for (n, (name, member)) in members.iter().enumerate() {
            @if n > 0 { br; }
            @let label = match name.as_str() {
                "key" => "задача",
                "from" => "от задачи",
                "to" => "к задаче",
                "type" => "тип связи",
                "status" => "статус",
                "body" => "текст",
                "summary" => "название",
                "issue_type" => "тип задачи",
                "description" => "описание",
                "labels" => "метки",
                "parent" => "родитель",
                "jql" => "JQL",
                other => other,
            };
            span.member {
                span.hint { (Text(label)) ":" }
                " "
                @match (name.as_str(), member, link_html(value)) {
                    // A link's type with its direction in Russian, between the two keys
                    //: «blocks: AURORA-1 блокирует AURORA-2».
                    ("type", serde_json::Value::String(link_type), Some(link)) => {
                        span.value { (Text(&clip(link_type, 160))) } ": " (link)
                    }
                    _ => (member_html(name, member)),
                }
            }
        }
    }
}

/// What a failed or skipped command's row offers: the retry the service would accept, or, when
/// its dependency ended without a result, that one (retrying it brings this one along).
fn retry_cell(
    command: &CommandView,
    known: &[&CommandView],
    csrf: Option<&str>,
    back: &str,
) -> Markup {
    let Some(csrf) = csrf else {
        return html! {};
    };
    if !matches!(
        command.status,
        CommandStatus::Failed | CommandStatus::Skipped
    ) {
        return html! {};
    }
    let blocking = command
        .depends_on
        .and_then(|id| known.iter().find(|c| c.id == id))
        .filter(|d| {
            matches!(
                d.status,
                CommandStatus::Failed | CommandStatus::Skipped | CommandStatus::Cancelled
            )
        });
    match blocking {
        // A command left as it is in Jira is never retried: its dependents run only as copies
        // in a new batch, offered on its page.
        Some(dependency) if dependency.status == CommandStatus::Cancelled => html! {
            span.hint {
                "Зависит от "
                a href={ "/ui/commands/" (dependency.id) } { "команды " (dependency.seq) }
                " («" (dependency.status.label()) "»): в этом пакете не выполнится. "
                @if crate::service::enqueued_again(command.error.as_deref()) {
                    "Поставлена снова новым пакетом."
                } @else {
                    "Поставить новым пакетом можно на странице той команды."
                }
            }
        },
        Some(dependency) => html! {
            span.hint {
                "Зависит от "
                a href={ "/ui/batches/" (dependency.batch_id) "#command-" (dependency.id) } {
                    "команды " (dependency.seq)
                }
                " («" (dependency.status.label()) "»): повторите её, эта пойдёт следом."
            }
        },
        None => form(
            &format!("/ui/commands/{}/retry", command.id),
            csrf,
            &[("back", back)],
            "Повторить",
            "",
        ),
    }
}

/// The commands' table; `csrf` is given where the failed may be retried (not in a cancelled
/// batch, whose commands never go back to Jira); `others` are commands of the same batches not
/// in the table that the rows may depend on.
pub(super) fn command_rows(
    commands: &[CommandView],
    others: &[CommandView],
    csrf: Option<&str>,
    back: &str,
) -> Markup {
    let known: Vec<&CommandView> = commands.iter().chain(others).collect();
    html! {
        div.scroll {
            table.commands {
                thead {
                    tr {
                        th { "Команда" } th.type { "Тип" } th.dependency { "Зависит от" }
                        th { "Параметры" } th { "Статус" } th.deliveries { "Выдачи" }
                        th.agent-name { "Агент" } th { "Результат или ошибка" } th { "Действие" }
                    }
                }
                tbody {
                    @for c in commands {
                        tr id={ "command-" (c.id) } {
                            td {
                                a href={ "/ui/commands/" (c.id) } title={ "пакет " (c.batch_id) ", команда " (c.seq) } {
                                    "команда" (NBSP) (c.seq)
                                }
                            }
                            td.type { (command_type_words(c.command_type)) }
                            td.dependency {
                                // The dependency by its position in the batch, as `depends_on` counts.
                                @match c.depends_on {
                                    Some(id) => a.dependency href={ "/ui/commands/" (id) } {
                                        "команда"
                                        @if let Some(d) = known.iter().find(|d| d.id == id) {
                                            (NBSP) (d.seq)
                                        }
                                    },
                                    None => "—",
                                }
                            }
                            td.params { (members_html(&c.params)) }
                            td.status { (attempts_words(c)) }
                            td.num.deliveries { (c.deliveries) }
                            td.agent-name { (or_dash(c.claimed_by.as_deref())) }
                            td.outcome {
                                @match (&c.error, &c.result) {
                                    (Some(error), _) => span.error { (Text(&clip(error, 400))) },
                                    (None, Some(result)) => (members_html(result)),
                                    (None, None) => "—",
                                }
                            }
                            td { (retry_cell(c, &known, csrf, back)) }
                        }
                    }
                }
            }
        }
    }
}

/// A command's status, with how its earlier attempts ended when it was retried.
fn attempts_words(command: &CommandView) -> Markup {
    let uncounted = command
        .uncounted_since
        .as_ref()
        .filter(|_| command.uncounted_releases > 0);
    html! {
        (status_badge(command.status.as_str()))
        @if let Some(last) = command.attempts.last() {
            br;
            span.hint title=(Text(last.error.as_deref().unwrap_or_default())) {
                "повторена " (words::count(command.attempts.len() as u64, &TIMES))
                ", прежде «" (last.status.label()) "»"
            }
        }
        @if let Some(waiting) = &command.waiting {
            // Passed over by agents that cannot honour it (an edit with a base, older agents).
            br; span.hint.bad { (Text(waiting)) }
        }
        @if let Some(not_before) = &command.not_before {
            // Given back by its agent after a lost answer: waits before the next delivery.
            br;
            span.hint {
                "возвращена агентом, выдача не раньше "
                (crate::domain::time::shown_utc(not_before.at()))
            }
        }
        @if let Some(since) = uncounted {
            // Given back with nothing sent to Jira: its budget, for all to see.
            br;
            span.hint {
                "возвращена агентом без отправки в Jira "
                (words::count(u64::from(command.uncounted_releases), &TIMES)) " подряд, с "
                (crate::domain::time::shown_utc(since.at())) "; после "
                (crate::service::MAX_UNCOUNTED_RELEASES) " раз или часа хаб её завершит с ошибкой"
            }
        }
        @if let Some(marker) = &command.may_exist_in_jira {
            // Cancelled after it was handed out: what it made may be in Jira, marked.
            br;
            span.hint {
                "могла успеть попасть в Jira: ищите свойство jira-hub " (Text(&marker.to_string()))
            }
        }
    }
}

/// One batch with its commands.
pub(super) fn batch(view: &BatchView, csrf: &str, now: OffsetDateTime) -> Markup {
    let back = format!("/ui/batches/{}", view.id);
    let (class, label) = batch_status_words(view);
    let failed = view.counters.get("failed").copied().unwrap_or(0)
        + view.counters.get("skipped").copied().unwrap_or(0);
    let retry = view.cancelled_at.is_none().then_some(csrf);
    html! {
        section #batch-head data-live {
            dl.facts {
                dt { "Статус" } dd #batch-status class=(class) { (label) }
                dt { "Команды" } dd { (counter_words(&view.counters)) }
                dt { "Автор" } dd { (Text(&view.author)) }
                dt { "Проект" } dd { (or_dash(view.project.as_deref())) }
                dt { "Создан" } dd { (time_of(&view.created_at, now)) }
                @if let Some(at) = &view.cancelled_at {
                    dt { "Отменён" } dd { (time_of(at, now)) }
                }
                (super::conflict::batch_fact(view))
            }
            @if view.cancelled_at.is_some() {
                (cancel_outcome(view))
            }
            p.actions {
                @if failed > 0 && view.cancelled_at.is_none() {
                    (form(
                        &format!("/ui/batches/{}/retry-failed", view.id),
                        csrf,
                        &[],
                        &format!("Повторить неудачные ({failed})"),
                        "",
                    ))
                }
                // Cancelling again would change nothing: the button goes once the batch is
                // cancelled. A step of its own that asks first (a page, so it works without
                // JavaScript).
                @if view.cancelled_at.is_none()
                    && matches!(view.status, BatchStatus::Queued | BatchStatus::Running)
                {
                    a.button.danger href={ "/ui/batches/" (view.id) "/cancel" } { "Отменить пакет…" }
                }
            }
        }
        section #batch-commands data-live {
            h2 { "Команды" }
            (command_rows(&view.commands, &[], retry, &back))
        }
    }
}

/// What cancelling a batch did and did not do: queued commands were taken off the queue;
/// commands already at the agent are not stopped and end as the agent reports (or «отменена»
/// when it never does).
fn cancel_outcome(view: &BatchView) -> Markup {
    let count = |status: &str| view.counters.get(status).copied().unwrap_or(0) as u64;
    let cancelled = count("cancelled");
    let at_agent = count("claimed");
    html! {
        p id="cancel-outcome" class="hint" {
            @if cancelled > 0 {
                "Отмена сняла с очереди " (words::count(cancelled, &COMMAND_FORMS)) ". "
            }
            @if at_agent > 0 {
                "У агента " (words::plural(at_agent, &["осталась", "остались", "остались"])) " "
                (words::count(at_agent, &COMMAND_FORMS)) ": отмена "
                (words::plural(at_agent, &["её", "их", "их"]))
                " не прерывает, итог покажет агент (а если он не ответит, "
                (words::plural(at_agent, &["она станет", "они станут", "они станут"]))
                " «отменена», в Jira не повторяясь)."
            } @else {
                "Больше в Jira не уйдёт ни одна команда пакета."
            }
        }
    }
}

/// The step before cancelling a batch: what cancelling does, and the button that does it.
pub(super) fn cancel_confirmation(view: &BatchView, csrf: &str, back: &str) -> Markup {
    let count = |status: &str| view.counters.get(status).copied().unwrap_or(0) as u64;
    let queued = count("queued");
    let at_agent = count("claimed");
    html! {
        p #cancel-question { "Отменить пакет " (view.id) " «" (Text(&view.title)) "»?" }
        ul {
            li {
                "Снимутся с очереди: " b { (words::count(queued, &COMMAND_FORMS)) } "; в Jira "
                (words::plural(queued, &["она не уйдёт", "они не уйдут", "они не уйдут"])) "."
            }
            @if at_agent > 0 {
                li {
                    "У агента: " b { (words::count(at_agent, &COMMAND_FORMS)) } "; отмена "
                    (words::plural(at_agent, &["её", "их", "их"])) " не прерывает, итог покажет агент."
                }
            }
            li { "Отменённый пакет нельзя продолжить; неудачные команды в нём не повторяются." }
        }
        p.actions {
            (form(
                &format!("/ui/batches/{}/cancel", view.id),
                csrf,
                &[("confirmed", "yes"), ("back", back)],
                "Да, отменить пакет",
                "danger",
            ))
            a.button href=(Text(back)) { "Нет, вернуться" }
        }
    }
}

/// A command's own page: its params whole, every attempt with its agent and times, its Jira
/// calls and 429s, the keys it names linked to the mirror, its dependency and dependents.
pub(super) fn command(page: &CommandPage, csrf: &str, now: OffsetDateTime) -> Markup {
    let c = &page.command;
    // After a retry the stored agent and time are the last attempt's until the next delivery.
    let handed_out = c
        .attempts
        .last()
        .is_none_or(|last| c.deliveries > last.deliveries);
    let known: Vec<&CommandView> = page.dependency.iter().collect();
    let retry = (!page.batch_cancelled).then_some(csrf);
    let back = format!("/ui/commands/{}", c.id);
    let time_or_dash = |at: Option<&crate::domain::time::Utc>| match at {
        Some(at) => time_of(at, now),
        None => html! { "—" },
    };
    html! {
        section #command-head data-live {
            dl.facts {
                dt { "Пакет" }
                dd { a href={ "/ui/batches/" (c.batch_id) } { "пакет " (c.batch_id) } ": " (Text(&page.batch_title)) }
                dt { "Тип" } dd { (command_type_words(c.command_type)) }
                dt { "Статус" } dd #command-status { (attempts_words(c)) }
                dt { "Выдано агенту, раз" } dd { (c.deliveries) }
                dt { "Агент" }
                dd { @if handed_out { (or_dash(c.claimed_by.as_deref())) } @else { "—" } }
                dt { "Выдана" }
                dd {
                    @match (&c.claimed_at, handed_out) {
                        (Some(at), true) => (time_of(at, now)),
                        (_, false) => "ещё не выдана",
                        (None, true) => "—",
                    }
                }
                dt { "Закончена" } dd { (time_or_dash(c.finished_at.as_ref())) }
                dt { "Вызовов Jira" } dd { (c.jira_calls) }
                dt { "Ответов 429" } dd { (c.rate_limited) }
                dt { "Пауза перед выдачей" } dd { (duration_words(c.pause_seconds)) }
                @if let Some(d) = &page.dependency {
                    dt { "Зависит от" }
                    dd { (command_ref(d.batch_id, d.seq, d.id)) " («" (d.status.label()) "»)" }
                }
                @if !page.dependents.is_empty() {
                    dt { "От неё зависят" }
                    dd {
                        @for (n, d) in page.dependents.iter().enumerate() {
                            @if n > 0 { ", " }
                            (command_ref(d.batch_id, d.seq, d.id))
                        }
                    }
                }
                @if let Some(run) = &page.run {
                    dt { "Обновление" }
                    dd {
                        (refresh_name(run)) " (" (run_kind_words(run.kind)) "), "
                        (run_status_words(run.run.status)) ": страниц " (run.run.pages) ", задач "
                        (run.run.issues_seen) ", изменилось " (run.run.issues_changed) ", длилось "
                        (millis_words(run_millis(run, now)))
                    }
                }
                @if !page.keys.is_empty() {
                    dt { "Задачи" }
                    dd #command-keys {
                        @for (n, (key, present)) in page.keys.iter().enumerate() {
                            @if n > 0 { ", " }
                            @if *present {
                                a href={ "/ui/issues/" (segment(key)) } { (Text(key)) }
                            } @else {
                                (Text(key)) " (нет в зеркале)"
                            }
                        }
                    }
                }
                @if let Some(link) = link_html(&c.params) {
                    dt { "Связь" } dd #command-link { (link) }
                }
            }
            p.actions { (retry_cell(c, &known, retry, &back)) }
            (super::conflict::section(c, &page.dependents, retry, now))
            @if let Some(error) = &c.error {
                h2 { "Ошибка" } p.error { (Text(error)) }
            }
            @if let Some(result) = &c.result {
                h2 { "Результат" } pre.json #command-result { (Text(&pretty(result))) }
            }
            h2 { "Параметры" } pre.json #command-params { (Text(&pretty(&c.params))) }
            h2 { "Попытки" }
            @if c.attempts.is_empty() {
                p { "Команду не повторяли: попытка одна, выше." }
            } @else {
                div.scroll {
                    table #attempts {
                        thead {
                            tr {
                                th { "Попытка" } th { "Итог" } th { "Выдачи" } th { "Агент" }
                                th { "Выдана" } th { "Закончена" } th { "Повторена" }
                                th { "Результат или ошибка" }
                            }
                        }
                        tbody {
                            @for (n, a) in c.attempts.iter().enumerate() {
                                tr {
                                    td { (n + 1) }
                                    td { (status_badge(a.status.as_str())) }
                                    td.num { (a.deliveries) }
                                    td { (or_dash(a.claimed_by.as_deref())) }
                                    td { (time_or_dash(a.claimed_at.as_ref())) }
                                    td { (time_or_dash(a.finished_at.as_ref())) }
                                    td { (time_of(&a.retried_at, now)) }
                                    td {
                                        @match (&a.error, &a.result) {
                                            (Some(error), _) => span.error { (Text(error)) },
                                            (None, Some(result)) => code.json { (Text(&json_text(result))) },
                                            (None, None) => "—",
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                p.hint {
                    "Сейчас попытка " (c.attempts.len() + 1) ". Вызовы Jira и ответы 429 хаб считает \
                     для команды в целом, по попыткам не делит."
                }
            }
        }
    }
}

/// JSON indented as a person reads it, whole.
fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

// ---------------------------------------------------------------------------------------------
// Failed commands

pub(super) fn failed(list: &[FailedBatch], csrf: &str, limit: i64) -> Markup {
    html! {
        section #failed-list data-live {
            p.hint { "Команды со статусом «ошибка» или «пропущена», последние " (limit) ", по пакетам." }
            @if list.is_empty() {
                p { "Неудачных команд нет." }
            }
            @for batch in list {
                @let id = batch.id;
                @let retry = (!batch.cancelled).then_some(csrf);
                article.card.wide id={ "failed-batch-" (id) } {
                    h2 { a href={ "/ui/batches/" (id) } { "Пакет " (id) } ": " (Text(&batch.title)) }
                    p { "Проект: " (or_dash(batch.project.as_deref())) }
                    p.actions {
                        @if batch.cancelled {
                            span.hint { "Пакет отменён: его команды не повторяются." }
                        } @else {
                            (form(
                                &format!("/ui/batches/{id}/retry-failed"),
                                csrf,
                                &[("back", "/ui/failed")],
                                "Повторить все неудачные команды пакета",
                                "",
                            ))
                        }
                        @if batch.open_commands > 0 && !batch.cancelled {
                            a.button.danger href={ "/ui/batches/" (id) "/cancel?back=/ui/failed" } {
                                "Отменить пакет… (не закончено: "
                                (words::count(batch.open_commands.max(0) as u64, &COMMAND_FORMS)) ")"
                            }
                        }
                    }
                    (command_rows(&batch.commands, &batch.dependencies, retry, "/ui/failed"))
                }
            }
        }
    }
}
