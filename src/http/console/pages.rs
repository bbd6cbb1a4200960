//! The bodies of the console's pages, from the service's views. Every text from outside goes
//! through [`esc`]; the parts that change while the page is open are `data-live` sections with an
//! id, which the page's script replaces in place.

use super::charts::{self, Mark, Unit};
use super::html::{
    clip, command_status_words, command_type_words, duration_words, esc, form, run_kind_words,
    run_status_words, seconds_since, segment, size_words, time_and_age, time_of,
};
use crate::domain::command::{BatchStatus, CommandStatus, RunStatus};
use crate::domain::time::Utc;
use crate::domain::words::{self, COMMANDS as COMMAND_FORMS, TIMES};
use crate::service::{
    BatchView, CommandView, FailedBatch, HourActivity, IssueView, Overview, ProjectIssues,
    ProjectView, RelayState, SliceRow, SyncRunView,
};
use std::fmt::Write as _;
use time::OffsetDateTime;

/// The unit of the charts of commands.
const COMMANDS: Unit = &COMMAND_FORMS;

/// A running refresh with no page from the agent for this long is flagged as stalled: a page of
/// Jira's search takes seconds, a pause Jira asks for (429) at most a few minutes.
pub(super) const REFRESH_STALLED_SECONDS: i64 = 10 * 60;

/// Statuses of a batch a list can be filtered by.
const BATCH_FILTERS: &[BatchStatus] = &[
    BatchStatus::Queued,
    BatchStatus::Running,
    BatchStatus::Completed,
    BatchStatus::Cancelled,
];

/// How many rows of a slice the page shows.
pub(super) const SLICE_ROWS: usize = 1000;

fn or_dash(value: Option<&str>) -> String {
    value.map_or_else(|| "—".to_string(), |v| esc(v).to_string())
}

/// The counters that are not zero, in words: `выполнена 3 · ошибка 1`.
fn counter_words<'a>(counters: impl IntoIterator<Item = (&'a &'static str, &'a usize)>) -> String {
    let parts: Vec<String> = counters
        .into_iter()
        .filter(|(_, n)| **n > 0)
        .map(|(status, n)| {
            format!(
                "<span class=\"st st-{status}\">{} {n}</span>",
                command_status_words(status)
            )
        })
        .collect();
    if parts.is_empty() {
        "нет команд".to_string()
    } else {
        parts.join(" ")
    }
}

/// A batch's status as the console shows it: a batch that completed with failed or skipped
/// commands is «завершён с ошибками», not the green «завершён».
fn batch_status_words(view: &BatchView) -> (String, &'static str) {
    let failed = view.counters.get("failed").copied().unwrap_or(0)
        + view.counters.get("skipped").copied().unwrap_or(0);
    if view.status == BatchStatus::Completed && failed > 0 {
        ("bs bs-completed-failed".to_string(), "завершён с ошибками")
    } else {
        (format!("bs bs-{}", view.status), view.status_label)
    }
}

fn status_badge(status: &str) -> String {
    format!(
        "<span class=\"st st-{}\">{}</span>",
        esc(status),
        esc(command_status_words(status))
    )
}

fn run_duration(run: &SyncRunView, now: OffsetDateTime) -> i64 {
    let end = run.run.finished_at.as_ref().map_or(now, |f| f.at());
    (end - run.run.started_at.at()).whole_seconds().max(0)
}

/// What a running refresh has done so far.
fn run_progress(run: &SyncRunView, now: OffsetDateTime) -> String {
    let of_total = match run.run.total {
        Some(total) => format!(" из {total}"),
        None => String::new(),
    };
    format!(
        "<li class=\"progress\">№{} ({}): идёт {}, страниц: <b>{}</b>, задач получено: <b>{}</b>{of_total}, изменилось: {}</li>",
        run.run.id,
        run_kind_words(run.kind),
        duration_words(run_duration(run, now)),
        run.run.pages,
        run.run.issues_seen,
        run.run.issues_changed
    )
}

// ---------------------------------------------------------------------------------------------
// Overview

pub(super) fn overview(view: &Overview) -> String {
    let now = view.now.at();
    let mut out = String::with_capacity(32 * 1024);
    out.push_str("<section id=\"overview-cards\" class=\"cards\" data-live>");
    held_card(&mut out, &view.held_runs);

    // The queue.
    out.push_str("<article class=\"card\"><h2>Очередь</h2><table class=\"counts\">");
    for q in &view.queue {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\" data-status=\"{}\">{}</td></tr>",
            status_badge(&q.status),
            esc(&q.status),
            q.commands
        );
    }
    out.push_str("</table>");
    match &view.oldest_queued_at {
        Some(at) => {
            let _ = write!(
                out,
                "<p>Старейшая команда в очереди ждёт <b>{}</b> (с {}).</p>",
                duration_words(seconds_since(at, now)),
                time_of(at)
            );
        }
        None => {
            // A command in an agent's hands is not "nothing waiting" (issue 25 item 4).
            let claimed = view
                .queue
                .iter()
                .filter(|q| q.status == crate::domain::command::CommandStatus::Claimed.as_str())
                .map(|q| u64::try_from(q.commands).unwrap_or(0))
                .sum::<u64>();
            if claimed > 0 {
                let _ = write!(
                    out,
                    "<p>Новых команд в очереди нет; у агента {}.</p>",
                    crate::domain::words::count(claimed, &crate::domain::words::COMMANDS)
                );
            } else {
                out.push_str("<p>В очереди ничего не ждёт.</p>");
            }
        }
    }
    out.push_str("</article>");

    // The agents.
    out.push_str("<article class=\"card\"><h2>Агенты</h2>");
    if view.agents.is_empty() {
        out.push_str("<p>Агент ещё не обращался к хабу.</p>");
    }
    for agent in &view.agents {
        let jira = match agent.jira_ok {
            Some(true) => "<span class=\"ok\">Jira доступна</span>",
            Some(false) => "<span class=\"bad\">Jira недоступна</span>",
            None => "<span>о Jira не сообщал</span>",
        };
        let silent = agent.silent;
        let _ = write!(
            out,
            "<div class=\"agent{}\"><h3>{}</h3><p>Был на связи {}<br>Версия: {} · {}</p>",
            if silent { " silent" } else { "" },
            esc(&agent.agent),
            time_and_age(&agent.last_seen_at, now),
            or_dash(agent.version.as_deref()),
            jira
        );
        if silent {
            let _ = write!(
                out,
                "<p class=\"bad\" role=\"status\">Молчит {} (с {}): {}. \
                 Работает ли он, есть ли связь с хабом или папкой обмена?</p>",
                duration_words(seconds_since(&agent.last_seen_at, now)),
                time_of(&agent.last_seen_at),
                match agent.heartbeat_seconds {
                    Some(period) => format!(
                        "пропущены два сигнала о жизни (агент шлёт их раз в {})",
                        duration_words(i64::from(period))
                    ),
                    None => "агент обращается к хабу хотя бы раз в 10 мин".to_string(),
                }
            );
        }
        if let Some(error) = &agent.last_error {
            let _ = write!(
                out,
                "<p class=\"error\">Последняя ошибка: {}</p>",
                esc(&clip(error, 300))
            );
        }
        if let Some(check) = &agent.last_check {
            // The last preflight (`jira-hub agent --check`) and its failing lines.
            let failing: Vec<_> = check.lines.iter().filter(|l| !l.ok).collect();
            let _ = write!(
                out,
                "<p class=\"check{}\">Проверка настроек (agent --check) {}: {}</p>",
                if check.ok { "" } else { " bad" },
                esc(&check.ran_at),
                if check.ok {
                    "всё в порядке".to_string()
                } else {
                    format!("ошибок: {}", failing.len())
                }
            );
            if !failing.is_empty() {
                out.push_str("<ul class=\"check-failures\">");
                for line in failing {
                    let _ = write!(
                        out,
                        "<li>{}: {}</li>",
                        esc(&line.name),
                        esc(&clip(&line.detail, 500))
                    );
                }
                out.push_str("</ul>");
            }
        }
        out.push_str("</div>");
    }
    out.push_str("</article>");

    // The relay folder.
    out.push_str("<article class=\"card\"><h2>Папка обмена</h2>");
    match &view.relay {
        RelayState::NotSet => {
            out.push_str("<p>Не задана: агент работает только через HTTP.</p>");
        }
        RelayState::Missing { dir } => {
            let _ = write!(
                out,
                "<p class=\"bad\">Нет на месте: <code>{}</code>. Подключена ли общая папка?</p>",
                esc(dir)
            );
        }
        RelayState::Unusable { dir, problem } => {
            let _ = write!(
                out,
                "<p class=\"bad\">Не используется: <code>{}</code></p><p>{}</p>",
                esc(dir),
                esc(problem)
            );
        }
        RelayState::Present {
            dir,
            waiting,
            refused_today,
        } => {
            let _ = write!(
                out,
                "<p class=\"ok\">На месте: <code>{}</code></p>\
                 <p>Файлов ждут обработки: <b>{waiting}</b><br>Отклонено сегодня: <b>{refused_today}</b></p>",
                esc(dir)
            );
        }
    }
    out.push_str("</article>");

    // The mirror and refreshes.
    let _ = write!(
        out,
        "<article class=\"card\"><h2>Зеркало</h2><p>Задач в зеркале: <b>{}</b></p>",
        view.issues
    );
    match view
        .last_full_refresh
        .as_ref()
        .and_then(|run| run.run.finished_at.as_ref())
    {
        Some(at) => {
            let _ = write!(
                out,
                "<p>Последнее полное обновление: {}</p>",
                time_and_age(at, now)
            );
        }
        None => out.push_str("<p>Полного обновления ещё не было.</p>"),
    }
    if view.running.is_empty() {
        out.push_str("<p>Сейчас обновление не идёт.</p>");
    } else {
        out.push_str("<p>Идёт обновление:</p><ul class=\"runs\">");
        for (i, run) in view.running.iter().enumerate() {
            out.push_str(&run_progress(run, now));
            let moved = view.running_moved_at.get(i).and_then(Option::as_ref);
            let since = moved.unwrap_or(&run.run.started_at);
            if seconds_since(since, now) > REFRESH_STALLED_SECONDS {
                let _ = write!(
                    out,
                    "<li class=\"bad stalled\">№{} стоит: от агента ничего нет {} (с {}). \
                     Если агент молчит, обновление продолжится, когда он вернётся.</li>",
                    run.run.id,
                    duration_words(seconds_since(since, now)),
                    time_of(since)
                );
            }
        }
        out.push_str("</ul>");
    }
    out.push_str("</article>");

    // The database.
    let _ = write!(
        out,
        "<article class=\"card\"><h2>База данных</h2><p>Размер: <b>{}</b>",
        size_words(view.database_bytes)
    );
    if view.wal_bytes > 0 {
        let _ = write!(out, " (журнал WAL: {})", size_words(view.wal_bytes));
    }
    out.push_str("</p>");
    match &view.last_backup {
        Some(backup) => {
            let _ = write!(
                out,
                "<p>Последняя копия: <code>{}</code>, {}<br>{}</p>",
                esc(&backup.name),
                size_words(backup.bytes),
                time_and_age(&backup.modified, now)
            );
        }
        None => out.push_str("<p class=\"bad\">Резервных копий нет.</p>"),
    }
    out.push_str("</article></section>");

    // The charts.
    out.push_str("<section id=\"overview-charts\" class=\"charts\" data-live>");
    let hour_label = |at: OffsetDateTime| {
        format!(
            "{:02}.{:02} {:02}:00",
            at.day(),
            u8::from(at.month()),
            at.hour()
        )
    };
    let (first, last) = match (view.hours.first(), view.hours.last()) {
        (Some(first), Some(_)) => (hour_label(first.start), "сейчас".to_string()),
        _ => (String::new(), String::new()),
    };
    let hourly = |value: fn(&HourActivity) -> f64| -> Vec<Mark> {
        view.hours
            .iter()
            .map(|h| Mark {
                label: format!("{} UTC", hour_label(h.start)),
                value: value(h),
                class: "",
            })
            .collect()
    };
    type Draw = fn(&str, Unit, &[Mark], &str, &str) -> String;
    type Value = fn(&HourActivity) -> f64;
    let hourly_charts: [(&str, Unit, Value, Draw); 3] = [
        (
            "Глубина очереди (в очереди и у агента) по часам",
            COMMANDS,
            |h| h.queue_depth as f64,
            charts::line,
        ),
        (
            "Выполнено команд в час",
            COMMANDS,
            |h| h.finished as f64,
            charts::bars,
        ),
        (
            "Ограничение частоты Jira (ответы 429) в час",
            &["ответ", "ответа", "ответов"],
            |h| h.rate_limited as f64,
            charts::bars,
        ),
    ];
    for (title, unit, value, draw) in hourly_charts {
        out.push_str(&draw(title, unit, &hourly(value), &first, &last));
    }
    let runs: Vec<&SyncRunView> = view.recent_runs.iter().rev().collect();
    let run_marks: Vec<Mark> = runs
        .iter()
        .map(|run| Mark {
            label: format!(
                "№{} {}, {}",
                run.run.id,
                run_kind_words(run.kind),
                run_status_words(run.run.status)
            ),
            value: run_duration(run, now) as f64,
            class: match run.run.status {
                RunStatus::Failed => "bad",
                RunStatus::Running => "live",
                RunStatus::Held => "bad",
                RunStatus::Done => "",
            },
        })
        .collect();
    let (first_run, last_run) = match (runs.first(), runs.last()) {
        (Some(first), Some(last)) => (format!("№{}", first.run.id), format!("№{}", last.run.id)),
        _ => ("обновлений не было".to_string(), String::new()),
    };
    out.push_str(&charts::bars(
        "Длительность обновлений зеркала",
        &["с", "с", "с"],
        &run_marks,
        &first_run,
        &last_run,
    ));
    out.push_str("</section>");
    out
}

// ---------------------------------------------------------------------------------------------
// Batches

/// The list with its filter.
pub(super) fn batches(
    list: &[BatchView],
    projects: &[ProjectView],
    project: Option<&str>,
    status: Option<BatchStatus>,
    limit: i64,
) -> String {
    let mut out = String::with_capacity(16 * 1024);
    out.push_str(
        "<form method=\"get\" action=\"/ui/batches\" class=\"filter\">\
         <label>Проект <select name=\"project\"><option value=\"\">все</option>",
    );
    for p in projects {
        let selected = if project == Some(p.label.as_str()) {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<option value=\"{}\"{selected}>{} ({})</option>",
            esc(&p.label),
            esc(&p.name),
            esc(&p.label)
        );
    }
    out.push_str(
        "</select></label> <label>Статус <select name=\"status\"><option value=\"\">любой</option>",
    );
    for value in BATCH_FILTERS {
        let selected = if status == Some(*value) {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<option value=\"{value}\"{selected}>{}</option>",
            value.label()
        );
    }
    out.push_str("</select></label> <button type=\"submit\">Показать</button></form>");
    let _ = write!(
        out,
        "<section id=\"batch-list\" data-live><p class=\"hint\">Последние {limit} пакетов, новые сверху.</p>"
    );
    if list.is_empty() {
        out.push_str("<p>Пакетов нет.</p>");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table><thead><tr><th>№</th><th>Название</th><th>Проект</th>\
             <th>Автор</th><th>Создан</th><th>Статус</th><th>Команды</th></tr></thead><tbody>",
        );
        for b in list {
            let (class, label) = batch_status_words(b);
            let _ = write!(
                out,
                "<tr><td><a href=\"/ui/batches/{id}\">{id}</a></td><td><a href=\"/ui/batches/{id}\">{}</a></td>\
                 <td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{label}</td><td>{} из {}</td></tr>",
                esc(&b.title),
                or_dash(b.project.as_deref()),
                esc(&b.author),
                time_of(&b.created_at),
                counter_words(&b.counters),
                b.counters.values().sum::<usize>(),
                id = b.id,
            );
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</section>");
    out
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

/// What a failed or skipped command's row offers: the retry the service would accept, or, when
/// its dependency ended without a result, that one (retrying it brings this one along).
fn retry_cell(
    command: &CommandView,
    known: &[&CommandView],
    csrf: Option<&str>,
    back: &str,
) -> String {
    let Some(csrf) = csrf else {
        return String::new();
    };
    if !matches!(
        command.status,
        CommandStatus::Failed | CommandStatus::Skipped
    ) {
        return String::new();
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
        Some(dependency) => format!(
            "<span class=\"hint\">Зависит от <a href=\"/ui/batches/{}#command-{}\">№{}</a> («{}»): \
             повторите её, эта пойдёт следом.</span>",
            dependency.batch_id,
            dependency.id,
            dependency.seq,
            esc(dependency.status.label())
        ),
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
fn command_rows(
    out: &mut String,
    commands: &[CommandView],
    others: &[CommandView],
    csrf: Option<&str>,
    back: &str,
) {
    let known: Vec<&CommandView> = commands.iter().chain(others).collect();
    out.push_str(
        "<div class=\"scroll\"><table><thead><tr><th>№</th><th>Тип</th><th>Параметры</th><th>Статус</th>\
         <th>Выдач</th><th>Агент</th><th>Результат или ошибка</th><th></th></tr></thead><tbody>",
    );
    for c in commands {
        let outcome = match (&c.error, &c.result) {
            (Some(error), _) => format!("<span class=\"error\">{}</span>", esc(&clip(error, 400))),
            (None, Some(result)) => {
                format!("<code class=\"json\">{}</code>", esc(&json_text(result)))
            }
            (None, None) => "—".to_string(),
        };
        let retry = retry_cell(c, &known, csrf, back);
        let _ = write!(
            out,
            "<tr id=\"command-{}\"><td>{}</td><td>{}</td><td><code class=\"json\">{}</code></td><td class=\"status\">{}</td>\
             <td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{retry}</td></tr>",
            c.id,
            c.seq,
            command_type_words(c.command_type),
            esc(&json_text(&c.params)),
            attempts_words(c),
            c.deliveries,
            or_dash(c.claimed_by.as_deref()),
            outcome,
        );
    }
    out.push_str("</tbody></table></div>");
}

/// A command's status, with how its earlier attempts ended when it was retried.
fn attempts_words(command: &CommandView) -> String {
    let mut out = status_badge(command.status.as_str());
    if let Some(last) = command.attempts.last() {
        let _ = write!(
            out,
            "<br><span class=\"hint\" title=\"{}\">повторена {}, прежде «{}»</span>",
            esc(last.error.as_deref().unwrap_or_default()),
            words::count(command.attempts.len() as u64, &TIMES),
            esc(last.status.label())
        );
    }
    if let Some(not_before) = &command.not_before {
        // Given back by its agent after a lost answer (issue 19): waits before the next delivery.
        let _ = write!(
            out,
            "<br><span class=\"hint\">возвращена агентом, выдача не раньше {}</span>",
            esc(&not_before.to_string())
        );
    }
    out
}

/// One batch with its commands.
pub(super) fn batch(view: &BatchView, csrf: &str) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let back = format!("/ui/batches/{}", view.id);
    let (class, label) = batch_status_words(view);
    let _ = write!(
        out,
        "<section id=\"batch-head\" data-live><dl class=\"facts\">\
         <dt>Статус</dt><dd id=\"batch-status\" class=\"{class}\">{label}</dd>\
         <dt>Команды</dt><dd>{}</dd><dt>Автор</dt><dd>{}</dd><dt>Проект</dt><dd>{}</dd>\
         <dt>Создан</dt><dd>{}</dd>",
        counter_words(&view.counters),
        esc(&view.author),
        or_dash(view.project.as_deref()),
        time_of(&view.created_at),
    );
    if let Some(at) = &view.cancelled_at {
        let _ = write!(out, "<dt>Отменён</dt><dd>{}</dd>", time_of(at));
    }
    out.push_str("</dl>");
    if view.cancelled_at.is_some() {
        out.push_str(&cancel_outcome(view));
    }
    out.push_str("<p class=\"actions\">");
    let failed = view.counters.get("failed").copied().unwrap_or(0)
        + view.counters.get("skipped").copied().unwrap_or(0);
    if failed > 0 && view.cancelled_at.is_none() {
        out.push_str(&form(
            &format!("/ui/batches/{}/retry-failed", view.id),
            csrf,
            &[],
            &format!("Повторить неудачные ({failed})"),
            "",
        ));
    }
    // Cancelling again would change nothing: the button goes once the batch is cancelled.
    if view.cancelled_at.is_none()
        && matches!(view.status, BatchStatus::Queued | BatchStatus::Running)
    {
        out.push_str(&form(
            &format!("/ui/batches/{}/cancel", view.id),
            csrf,
            &[],
            "Отменить пакет",
            "danger",
        ));
    }
    out.push_str("</p></section><section id=\"batch-commands\" data-live><h2>Команды</h2>");
    let retry = view.cancelled_at.is_none().then_some(csrf);
    command_rows(&mut out, &view.commands, &[], retry, &back);
    out.push_str("</section>");
    out
}

/// What cancelling a batch did and did not do: queued commands were taken off the queue;
/// commands already at the agent are not stopped and end as the agent reports (or «отменена»
/// when it never does).
fn cancel_outcome(view: &BatchView) -> String {
    let count = |status: &str| view.counters.get(status).copied().unwrap_or(0) as u64;
    let cancelled = count("cancelled");
    let at_agent = count("claimed");
    let mut out = String::from("<p id=\"cancel-outcome\" class=\"hint\">");
    if cancelled > 0 {
        let _ = write!(
            out,
            "Отмена сняла с очереди {}. ",
            words::count(cancelled, &COMMAND_FORMS)
        );
    }
    if at_agent > 0 {
        let _ = write!(
            out,
            "У агента {} {}: отмена их не прерывает, итог покажет агент \
             (а если он не ответит, они станут «отменена», в Jira не повторяясь).",
            if at_agent == 1 {
                "осталась"
            } else {
                "остались"
            },
            words::count(at_agent, &COMMAND_FORMS),
        );
    } else {
        out.push_str("Больше в Jira не уйдёт ни одна команда пакета.");
    }
    out.push_str("</p>");
    out
}

// ---------------------------------------------------------------------------------------------
// Failed commands

pub(super) fn failed(list: &[FailedBatch], csrf: &str, limit: i64) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let _ = write!(
        out,
        "<section id=\"failed-list\" data-live><p class=\"hint\">Команды со статусом «ошибка» или «пропущена», \
         последние {limit}, по пакетам.</p>"
    );
    if list.is_empty() {
        out.push_str("<p>Неудачных команд нет.</p>");
    }
    for batch in list {
        let id = batch.id;
        let _ = write!(
            out,
            "<article class=\"card wide\" id=\"failed-batch-{id}\"><h2><a href=\"/ui/batches/{id}\">Пакет {id}</a>: {}</h2>\
             <p>Проект: {}</p><p class=\"actions\">",
            esc(&batch.title),
            or_dash(batch.project.as_deref())
        );
        if batch.cancelled {
            out.push_str("<span class=\"hint\">Пакет отменён: его команды не повторяются.</span>");
        } else {
            out.push_str(&form(
                &format!("/ui/batches/{id}/retry-failed"),
                csrf,
                &[("back", "/ui/failed")],
                "Повторить все неудачные пакета",
                "",
            ));
        }
        if batch.open_commands > 0 && !batch.cancelled {
            out.push_str(&form(
                &format!("/ui/batches/{id}/cancel"),
                csrf,
                &[("back", "/ui/failed")],
                &format!(
                    "Отменить пакет (не закончено: {})",
                    words::count(batch.open_commands.max(0) as u64, &COMMAND_FORMS)
                ),
                "danger",
            ));
        }
        out.push_str("</p>");
        let retry = (!batch.cancelled).then_some(csrf);
        command_rows(
            &mut out,
            &batch.commands,
            &batch.dependencies,
            retry,
            "/ui/failed",
        );
        out.push_str("</article>");
    }
    out.push_str("</section>");
    out
}

// ---------------------------------------------------------------------------------------------
// Mirror

pub(super) fn mirror(projects: &[ProjectIssues], total: i64) -> String {
    let mut out = String::with_capacity(4096);
    let _ = write!(
        out,
        "<section id=\"mirror-projects\" data-live><p>Задач в зеркале всего: <b>{total}</b></p>"
    );
    if projects.is_empty() {
        out.push_str("<p>Проектов нет.</p>");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table><thead><tr><th>Метка</th><th>Название</th><th>Доска</th>\
             <th>Задач</th></tr></thead><tbody>",
        );
        for p in projects {
            let board = match (p.project.board_id, &p.project.board_type) {
                (Some(id), Some(kind)) => format!("{id} ({})", esc(kind)),
                (Some(id), None) => id.to_string(),
                (None, _) => "—".to_string(),
            };
            let _ = write!(
                out,
                "<tr><td><a href=\"/ui/mirror/{}\">{}</a></td><td>{}</td><td>{board}</td><td class=\"num\">{}</td></tr>",
                segment(&p.project.label),
                esc(&p.project.label),
                esc(&p.project.name),
                p.issues
            );
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</section>");
    out
}

pub(super) fn slice(rows: &[SliceRow]) -> String {
    let own = rows.iter().filter(|r| !r.neighbor).count();
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<section id=\"slice\" data-live><p>Своих задач: <b>{own}</b>, соседних: <b>{}</b>.",
        rows.len() - own
    );
    if rows.len() > SLICE_ROWS {
        let _ = write!(out, " Показаны первые {SLICE_ROWS}.");
    }
    out.push_str(
        "</p><div class=\"scroll\"><table><thead><tr><th>Ключ</th><th>Тип</th><th>Статус</th>\
         <th>Название</th><th>Исполнитель</th><th></th></tr></thead><tbody>",
    );
    for row in rows.iter().take(SLICE_ROWS) {
        let issue = &row.issue;
        let mut marks = Vec::new();
        if row.neighbor {
            marks.push("соседняя");
        }
        if row.closed {
            marks.push("закрыта");
        }
        let _ = write!(
            out,
            "<tr><td><a href=\"/ui/issues/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            segment(&issue.key),
            esc(&issue.key),
            esc(&issue.issue_type),
            esc(&issue.status),
            esc(&clip(&issue.summary, 200)),
            or_dash(issue.assignee.as_deref()),
            marks.join(", ")
        );
    }
    out.push_str("</tbody></table></div></section>");
    out
}

pub(super) fn issue(view: &IssueView, csrf: &str) -> String {
    let i = &view.issue;
    let mut out = String::with_capacity(16 * 1024);
    let _ = write!(
        out,
        "<section id=\"issue-facts\" data-live><p class=\"summary\">{}</p><dl class=\"facts\">\
         <dt>Тип</dt><dd>{}</dd><dt>Статус</dt><dd>{}{}</dd><dt>Приоритет</dt><dd>{}</dd>\
         <dt>Исполнитель</dt><dd>{}</dd><dt>Автор</dt><dd>{}</dd><dt>Метки</dt><dd>{}</dd>\
         <dt>Эпик</dt><dd>{}</dd><dt>Спринт</dt><dd>{}</dd><dt>Срок</dt><dd>{}</dd>\
         <dt>В зеркале с</dt><dd>{}</dd></dl>",
        esc(&i.summary),
        esc(&i.issue_type),
        esc(&i.status),
        if view.closed { " (закрыта)" } else { "" },
        or_dash(i.priority.as_deref()),
        or_dash(i.assignee.as_deref()),
        or_dash(i.reporter.as_deref()),
        esc(&i.labels.join(", ")),
        or_dash(i.epic_key.as_deref()),
        or_dash(i.sprint.as_deref()),
        or_dash(i.duedate.as_deref()),
        time_of(&view.synced_at),
    );
    if let Some(description) = &i.description {
        let _ = write!(
            out,
            "<h2>Описание</h2><div class=\"text\">{}</div>",
            esc(description)
        );
    }
    out.push_str("<h2>Связи</h2>");
    if view.links.is_empty() {
        out.push_str("<p>Связей нет.</p>");
    } else {
        out.push_str("<ul>");
        for link in &view.links {
            let direction = if link.direction == "outward" {
                "→"
            } else {
                "←"
            };
            let other = if link.other_in_mirror {
                format!(
                    "<a href=\"/ui/issues/{}\">{}</a>",
                    segment(&link.other_key),
                    esc(&link.other_key)
                )
            } else {
                format!("{} (нет в зеркале)", esc(&link.other_key))
            };
            let _ = write!(out, "<li>{} {direction} {other}</li>", esc(&link.link_type));
        }
        out.push_str("</ul>");
    }
    out.push_str("<h2>Комментарии Jira</h2>");
    if view.comments.is_empty() {
        out.push_str("<p>Комментариев нет.</p>");
    }
    for c in &view.comments {
        let _ = write!(
            out,
            "<div class=\"comment\"><p class=\"meta\">{} · {}</p><div class=\"text\">{}</div></div>",
            or_dash(c.author.as_deref()),
            c.created
                .as_deref()
                .map_or_else(|| "—".to_string(), jira_time_of),
            esc(&c.body)
        );
    }
    out.push_str("</section><section id=\"notes\" data-live><h2>Заметки хаба</h2>");
    if view.notes.is_empty() {
        out.push_str("<p>Заметок нет.</p>");
    }
    for n in &view.notes {
        let _ = write!(
            out,
            "<div class=\"note\"><p class=\"meta\">{} · {}</p><div class=\"text\">{}</div></div>",
            esc(&n.author),
            time_of(&n.created_at),
            esc(&n.body)
        );
    }
    let _ = write!(
        out,
        "</section><form method=\"post\" action=\"/ui/issues/{}/notes\" class=\"note-form\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label for=\"note-author\">Автор</label><input id=\"note-author\" name=\"author\" required maxlength=\"100\">\
         <label for=\"note-body\">Заметка (в Jira не уходит)</label><textarea id=\"note-body\" name=\"body\" rows=\"4\" required></textarea>\
         <button type=\"submit\">Добавить заметку</button></form>",
        segment(&i.key),
        esc(csrf)
    );
    out
}

// ---------------------------------------------------------------------------------------------
// Sync runs

/// The full refreshes whose removals wait for an operator (issue 19), on the overview.
fn held_card(out: &mut String, held: &[crate::service::HeldRunView]) {
    if held.is_empty() {
        return;
    }
    out.push_str("<article class=\"card\"><h2>Удаление ждёт подтверждения</h2>");
    for run in held {
        let _ = write!(
            out,
            "<p class=\"bad\">Полное обновление №{} удалило бы из зеркала <b>{}</b> задач — больше, чем позволяет prune_guard. <a href=\"/ui/runs#held\">Проверить и подтвердить</a>.</p>",
            run.run_id, run.would_remove
        );
    }
    out.push_str("</article>");
}

/// The held runs with their confirm buttons, on the runs page.
fn held_section(out: &mut String, held: &[crate::service::HeldRunView], csrf: &str) {
    if held.is_empty() {
        return;
    }
    out.push_str("<section id=\"held\"><h2>Удаление ждёт подтверждения</h2>");
    for run in held {
        let projects: Vec<String> = run
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
        let _ = write!(
            out,
            "<p>Обновление №{}: удалило бы <b>{}</b> задач ({}); например: {}.</p><p class=\"actions\">",
            run.run_id,
            run.would_remove,
            esc(&projects.join(", ")),
            esc(&run.sample_keys.join(", "))
        );
        out.push_str(&form(
            &format!("/ui/sync-runs/{}/confirm", run.run_id),
            csrf,
            &[],
            "Подтвердить удаление",
            "danger",
        ));
        out.push_str("</p>");
    }
    out.push_str("</section>");
}

pub(super) fn runs_with_held(
    runs: &[SyncRunView],
    projects: &[ProjectView],
    held: &[crate::service::HeldRunView],
    csrf: &str,
    now: OffsetDateTime,
) -> String {
    let mut out = String::with_capacity(16 * 1024);
    held_section(&mut out, held, csrf);
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/ui/refresh\" class=\"filter\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label>Что обновить <select name=\"project\"><option value=\"\">все проекты</option>",
        esc(csrf)
    );
    for p in projects {
        let _ = write!(
            out,
            "<option value=\"{}\">{} ({})</option>",
            esc(&p.label),
            esc(&p.name),
            esc(&p.label)
        );
    }
    out.push_str("</select></label> <button type=\"submit\">Обновить сейчас</button></form>");
    out.push_str("<section id=\"runs\" data-live>");
    let running: Vec<&SyncRunView> = runs
        .iter()
        .filter(|r| r.run.status == RunStatus::Running)
        .collect();
    if !running.is_empty() {
        out.push_str("<p>Идёт обновление:</p><ul class=\"runs\">");
        for run in running {
            out.push_str(&run_progress(run, now));
        }
        out.push_str("</ul>");
    }
    if runs.is_empty() {
        out.push_str("<p>Обновлений ещё не было.</p>");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table><thead><tr><th>№</th><th>Вид</th><th>Статус</th><th>Начат</th>\
             <th>Длился</th><th>Получено</th><th>Изменено</th><th>Запрос</th><th>Ошибка</th></tr></thead><tbody>",
        );
        for run in runs {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td class=\"rs rs-{}\">{}</td><td>{}</td><td>{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td><code>{}</code></td><td>{}</td></tr>",
                run.run.id,
                run_kind_words(run.kind),
                run.run.status.as_str(),
                run_status_words(run.run.status),
                time_of(&run.run.started_at),
                duration_words(run_duration(run, now)),
                run.run.issues_seen,
                run.run.issues_changed,
                esc(&clip(&run.run.query, 200)),
                run.run.error.as_deref().map_or_else(
                    || "—".to_string(),
                    |e| format!("<span class=\"error\">{}</span>", esc(&clip(e, 300)))
                ),
            );
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</section>");
    out
}

/// A time Jira wrote (`2026-11-29T13:00:00.000+0300`) in the hub's form (`2026-11-29 10:00:00
/// UTC`), Jira's own text in the tooltip; text that is not such a time shows as it is.
fn jira_time_of(text: &str) -> String {
    match crate::jira::jira_time(text) {
        Some(at) => {
            let utc = Utc::new(at);
            format!(
                "<time datetime=\"{}\" title=\"{}\">{} UTC</time>",
                esc(utc.as_str()),
                esc(text),
                esc(&utc.as_str()[..19].replacen('T', " ", 1))
            )
        }
        None => esc(text).to_string(),
    }
}

/// A refusal or failure of an action, with a way back.
pub(super) fn problem(message: &str, back: &str) -> String {
    format!(
        "<p class=\"error\" role=\"alert\">{}</p><p><a href=\"{}\">Назад</a></p>",
        esc(message),
        esc(back)
    )
}
